/* SPDX-License-Identifier: MIT */
#include <rqspin/version.h>

unsigned int rqspin_version(void)
{
	return RQSPIN_VERSION;
}

const char *rqspin_version_string(void)
{
	return RQSPIN_VERSION_STRING;
}
