build-prof/user/lib/scrape.o: user/lib/scrape.c user/lib/scrape.h
user/lib/scrape.h:
