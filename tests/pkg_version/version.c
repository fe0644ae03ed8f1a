/* SPDX-License-Identifier: MIT */
/* The library reports the version its headers announce. */
#include <stdio.h>
#include <string.h>
#include <rqspin/rqspin.h>

int main(int argc, char **argv)
{
	char want[32];

	snprintf(want, sizeof(want), "%d.%d.%d", RQSPIN_VERSION_MAJOR, RQSPIN_VERSION_MINOR,
		 RQSPIN_VERSION_PATCH);
	if (rqspin_version() != RQSPIN_VERSION) {
		fprintf(stderr, "version: rqspin_version() = %#x, header %#x\n", rqspin_version(),
			(unsigned)RQSPIN_VERSION);
		return 1;
	}
	if (strcmp(rqspin_version_string(), RQSPIN_VERSION_STRING) != 0 ||
	    strcmp(RQSPIN_VERSION_STRING, want) != 0) {
		fprintf(stderr, "version: \"%s\", header \"%s\" (%s)\n", rqspin_version_string(),
			RQSPIN_VERSION_STRING, want);
		return 1;
	}
	/* The CMake project's version, when the test passes it. */
	if (argc > 1 && strcmp(argv[1], rqspin_version_string()) != 0) {
		fprintf(stderr, "version: library %s, project %s\n", rqspin_version_string(),
			argv[1]);
		return 1;
	}
	printf("version: %s\n", rqspin_version_string());
	return 0;
}
