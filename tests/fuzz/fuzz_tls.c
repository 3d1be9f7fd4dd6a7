// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over TLS connections (user/proxy/tls.c, tls_io.c): the
 * input is what the peer sends, cut into pieces whose sizes come from the
 * input, given to a socket of the HTTPS listener (first byte even) or to a
 * socket that connected to an https:// backend (odd) through the hooks the
 * io_uring loop uses (sock.c), over a fake struct pg_io whose sends
 * complete whole or in part between pieces; the clock may pass the
 * handshake's deadline. Garbage, truncated and mangled handshakes (the
 * seeds are real ClientHellos and ServerHellos) must not crash, leak or
 * read out of bounds (ASan), and:
 *  - s->qbytes is always the ciphertext not yet sent (no plain byte is
 *    queued here);
 *  - nothing reaches the socket's data event before the handshake is done;
 *  - a failed handshake is told once (eof for a client's, connected(-err)
 *    for a backend's), and after the close no handshake is in progress.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include "config/config.h"
#include "fuzz.h"
#include "proxy/sock.h"
#include "proxy/tls.h"
#include "proxy/worker_state.h"
#include "tls/tls.h"

static struct pg_config cfg;
static struct pg_gateway gw;
static struct pg_worker w;
static char dir[64], cert_path[96], key_path[96];
static volatile unsigned touched; /* bytes read, so that ASan checks them */

/* The socket under test and what its table of events was told. */
struct conn {
	struct pg_sock s;
	size_t delivered;
	int eofs, connects, last_res;
	bool hs_seen_done;
};

static bool c_data(struct pg_worker *wk, struct pg_sock *s, char *d, size_t n, int bid)
{
	struct conn *c = (struct conn *)s;

	(void)wk;
	(void)bid;
	FUZZ_CHECK(pg_tls_version(s)); /* only after the handshake */
	for (size_t i = 0; i < n; i++) /* every byte readable (ASan) */
		touched += (unsigned char)d[i];
	c->delivered += n;
	return false;
}

static void c_eof(struct pg_worker *wk, struct pg_sock *s, int err)
{
	struct conn *c = (struct conn *)s;

	c->eofs++;
	c->last_res = err;
	pg_sock_close(wk, s);
}

static void c_sent(struct pg_worker *wk, struct pg_sock *s, int err)
{
	(void)wk;
	(void)s;
	(void)err;
}

static void c_connected(struct pg_worker *wk, struct pg_sock *s, int res)
{
	struct conn *c = (struct conn *)s;

	c->connects++;
	c->last_res = res;
	if (res)
		pg_sock_close(wk, s);
	else
		s->can_send = true;
}

static void c_free(struct pg_worker *wk, struct pg_sock *s)
{
	(void)wk;
	free(s);
}

static const struct pg_sock_ops ops = {
    .name = "fuzz",
    .data = c_data,
    .eof = c_eof,
    .sent = c_sent,
    .connected = c_connected,
    .free = c_free,
};

/* --- a fake pg_io: a send stays outstanding until the input completes it */
static size_t pending; /* bytes the outstanding send names */

static void io_send(struct pg_worker *wk, struct pg_sock *s, const struct msghdr *m)
{
	(void)wk;
	FUZZ_CHECK(m->msg_iovlen == 1 && !pending);
	pending = m->msg_iov[0].iov_len;
	FUZZ_CHECK(pending && pending <= s->qbytes);
	for (size_t i = 0; i < pending; i++) /* the ciphertext is readable (ASan) */
		touched += ((const unsigned char *)m->msg_iov[0].iov_base)[i];
	s->refs++;
}

static void io_nop(struct pg_worker *wk, struct pg_sock *s)
{
	(void)wk;
	(void)s;
}

static void io_connect(struct pg_worker *wk, struct pg_sock *s, const union pg_sockaddr *sa)
{
	(void)wk;
	(void)s;
	(void)sa;
}

static void io_buf_return(struct pg_worker *wk, int bid)
{
	(void)wk;
	FUZZ_CHECK(bid < 0);
}

static const struct pg_io fake_io = {
    .recv = io_nop,
    .pause = io_nop,
    .send = io_send,
    .connect = io_connect,
    .shutdown = io_nop,
    .close = io_nop,
    .poll_rdhup = io_nop,
    .buf_return = io_buf_return,
};

static void make_cert(void)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_NAME *n = X509_NAME_new();
	X509V3_CTX v3;
	X509_EXTENSION *e;
	FILE *f;

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 30 * 86400L);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"fuzz.test", -1,
	                           -1, 0);
	X509_set_subject_name(x, n);
	X509_set_issuer_name(x, n);
	X509_set_pubkey(x, k);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:fuzz.test,IP:127.0.0.1");
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
	X509_sign(x, k, EVP_sha256());
	FUZZ_CHECK((f = fopen(cert_path, "w")) && PEM_write_X509(f, x) && !fclose(f));
	FUZZ_CHECK((f = fopen(key_path, "w")) &&
	           PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) && !fclose(f));
	X509_NAME_free(n);
	X509_free(x);
	EVP_PKEY_free(k);
}

static void cleanup(void)
{
	unlink(cert_path);
	unlink(key_path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[512];
	char *args[] = {"prefixgate",  "--no-bpf",         "--tls-listen",
	                "127.0.0.1:1", "--tls-cert",       cert_path,
	                "--tls-key",   key_path,           "--tls-handshake-timeout",
	                "100",         "--backend-tls-ca", cert_path};
	union pg_sockaddr sa;

	(void)argc;
	(void)argv;
	snprintf(dir, sizeof(dir), "/tmp/pg-fuzz-tls-XXXXXX");
	FUZZ_CHECK(mkdtemp(dir));
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
	snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
	atexit(cleanup);
	make_cert();
	FUZZ_CHECK(
	    !pg_config_parse(&cfg, sizeof(args) / sizeof(args[0]), args, NULL, err, sizeof(err)));
	gw.cfg = &cfg;
	gw.nworkers = 1;
	gw.maps.backends = calloc(PG_MAX_BACKENDS, sizeof(*gw.maps.backends));
	FUZZ_CHECK(gw.maps.backends);
	FUZZ_CHECK(!pg_addr_parse("127.0.0.1:443", &sa, err, sizeof(err)));
	pg_backend_addr_set(&gw.maps.backends[1], &sa);
	gw.maps.backends[1].flags = PG_BACKEND_ACTIVE | PG_BACKEND_TLS;
	FUZZ_CHECK(!pg_tls_init(&gw, err, sizeof(err)));
	w.gw = &gw;
	w.io = &fake_io;
	w.now_ms = 1000;
	FUZZ_CHECK(!pg_tls_worker_init(&w));
	return 0;
}

static uint64_t in_progress(void)
{
	return __atomic_load_n(&gw.tls->stats[0].in_progress, __ATOMIC_RELAXED);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conn *c = calloc(1, sizeof(*c));
	bool backend = size && (data[0] & 1);
	struct fuzz_rng rng;
	size_t off = size ? 1 : 0;

	FUZZ_CHECK(c);
	pending = 0;
	w.now_ms = 1000;
	fuzz_rng_seed(&rng, data, size < 16 ? size : 16);
	pg_sock_init(&c->s, -1, &ops);
	c->s.can_send = !backend;
	if (backend) {
		FUZZ_CHECK(!pg_tls_connect(&w, &c->s, 1));
		pg_sock_on_connected(&w, &c->s, 0); /* the ClientHello */
	} else {
		FUZZ_CHECK(!pg_tls_accept(&w, &c->s));
	}
	FUZZ_CHECK(in_progress() == 1 || c->s.closed);
	while (off < size && !c->s.closed) {
		size_t n = fuzz_piece(&rng, size - off);
		char *piece = malloc(n);
		uint64_t r = fuzz_rng_next(&rng);

		FUZZ_CHECK(piece);
		memcpy(piece, data + off, n);
		off += n;
		pg_sock_on_data(&w, &c->s, piece, n, -1);
		free(piece);
		pg_sock_flush_all(&w);
		if (pending && !c->s.closed && (r & 3)) { /* the send completes, in part or whole */
			size_t done = (r & 3) == 1 && pending > 1 ? pending / 2 : pending;

			pending = 0;
			c->s.refs--;
			pg_sock_on_sent(&w, &c->s, (int)done);
			pg_sock_flush_all(&w);
		}
		if (!c->s.closed && (r >> 8) % 16 == 0) { /* time passes */
			w.now_ms += 60;
			pg_tls_worker_tick(&w);
		}
		FUZZ_CHECK(c->s.closed || c->s.qbytes >= pending);
	}
	if (!c->s.closed) { /* the peer goes away */
		pg_sock_on_eof(&w, &c->s, 0);
		if (!c->s.closed)
			pg_sock_close(&w, &c->s);
	}
	FUZZ_CHECK(c->eofs + c->connects <= 2);
	FUZZ_CHECK(in_progress() == 0);
	pending = 0;
	w.flush_head = NULL;
	pg_sock_reap(&w, true);
	return 0;
}
