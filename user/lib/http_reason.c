// SPDX-License-Identifier: MIT
/* HTTP reason phrases (http.h pg_http_reason): the one table every answer
 * of the gateway, its admin API and the tools takes its status line from. */
#include <stddef.h>
#include "lib/http.h"

const char *pg_http_reason(int status)
{
	/* The IANA HTTP Status Code Registry (RFC 9110 §15; 102 RFC 2518, 103
	 * RFC 8297, 207/208/226/423/424/507/508 WebDAV and delta encoding, 425
	 * RFC 8470, 428/429/431/511 RFC 6585, 451 RFC 7725). */
	static const struct {
		int status;
		const char *text;
	} reasons[] = {
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

	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].status == status)
			return reasons[i].text;
	return "Error";
}
