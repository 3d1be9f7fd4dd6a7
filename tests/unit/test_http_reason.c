// SPDX-License-Identifier: MIT
/* The reason phrases of status lines (lib/http_reason.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>
#include "lib/http.h"

/* Every status of the IANA HTTP Status Code Registry has its registered
 * reason phrase (RFC 9110 §15, RFC 6585 for 428/429/431/511, ...): a
 * client or a log reading "429 Error" sees a phrase no one registered. */
static void test_reasons(void **state)
{
	static const struct {
		int status;
		const char *text;
	} registry[] = {
	    {100, "Continue"},
	    {101, "Switching Protocols"},
	    {102, "Processing"},
	    {103, "Early Hints"},
	    {200, "OK"},
	    {201, "Created"},
	    {202, "Accepted"},
	    {203, "Non-Authoritative Information"},
	    {204, "No Content"},
	    {205, "Reset Content"},
	    {206, "Partial Content"},
	    {207, "Multi-Status"},
	    {208, "Already Reported"},
	    {226, "IM Used"},
	    {300, "Multiple Choices"},
	    {301, "Moved Permanently"},
	    {302, "Found"},
	    {303, "See Other"},
	    {304, "Not Modified"},
	    {305, "Use Proxy"},
	    {307, "Temporary Redirect"},
	    {308, "Permanent Redirect"},
	    {400, "Bad Request"},
	    {401, "Unauthorized"},
	    {402, "Payment Required"},
	    {403, "Forbidden"},
	    {404, "Not Found"},
	    {405, "Method Not Allowed"},
	    {406, "Not Acceptable"},
	    {407, "Proxy Authentication Required"},
	    {408, "Request Timeout"},
	    {409, "Conflict"},
	    {410, "Gone"},
	    {411, "Length Required"},
	    {412, "Precondition Failed"},
	    {413, "Content Too Large"},
	    {414, "URI Too Long"},
	    {415, "Unsupported Media Type"},
	    {416, "Range Not Satisfiable"},
	    {417, "Expectation Failed"},
	    {421, "Misdirected Request"},
	    {422, "Unprocessable Content"},
	    {423, "Locked"},
	    {424, "Failed Dependency"},
	    {425, "Too Early"},
	    {426, "Upgrade Required"},
	    {428, "Precondition Required"},
	    {429, "Too Many Requests"},
	    {431, "Request Header Fields Too Large"},
	    {451, "Unavailable For Legal Reasons"},
	    {500, "Internal Server Error"},
	    {501, "Not Implemented"},
	    {502, "Bad Gateway"},
	    {503, "Service Unavailable"},
	    {504, "Gateway Timeout"},
	    {505, "HTTP Version Not Supported"},
	    {506, "Variant Also Negotiates"},
	    {507, "Insufficient Storage"},
	    {508, "Loop Detected"},
	    {511, "Network Authentication Required"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(registry) / sizeof(registry[0]); i++)
		if (strcmp(pg_http_reason(registry[i].status), registry[i].text))
			fail_msg("%d: \"%s\", registered \"%s\"", registry[i].status,
			         pg_http_reason(registry[i].status), registry[i].text);
	/* not registered: a phrase of none of them */
	assert_string_equal(pg_http_reason(299), "Error");
	assert_string_equal(pg_http_reason(-1), "Error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reasons),
	};

	return cmocka_run_group_tests_name("http_reason", tests, NULL, NULL);
}
