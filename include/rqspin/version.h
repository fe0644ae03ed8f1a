/* SPDX-License-Identifier: MIT */
/*
 * librqspin's version: the one a program was compiled against (macros) and
 * the one it runs with (rqspin_version()). Kept equal to project(VERSION)
 * in CMakeLists.txt, which refuses to configure when they differ.
 *
 * The major version is the SONAME (librqspin.so.<major>); within a major
 * version the library stays ABI compatible with older programs, including
 * the layouts the inline functions of the public headers compile in.
 */
#ifndef RQSPIN_VERSION_H
#define RQSPIN_VERSION_H

#include <rqspin/defs.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RQSPIN_VERSION_MAJOR 0
#define RQSPIN_VERSION_MINOR 1
#define RQSPIN_VERSION_PATCH 0
#define RQSPIN_VERSION_STRING "0.1.0"

/* One number that orders versions: RQSPIN_VERSION_ENCODE(0, 1, 0). */
#define RQSPIN_VERSION_ENCODE(major, minor, patch) \
	(((major) << 16) | ((minor) << 8) | (patch))
#define RQSPIN_VERSION \
	RQSPIN_VERSION_ENCODE(RQSPIN_VERSION_MAJOR, RQSPIN_VERSION_MINOR, RQSPIN_VERSION_PATCH)

/*
 * The version of the library loaded at run time, as RQSPIN_VERSION_ENCODE
 * numbers it. A program built against major M runs with any library of
 * major M whose number is at least the RQSPIN_VERSION it was compiled with:
 *   if (rqspin_version() >> 16 != RQSPIN_VERSION_MAJOR ||
 *       rqspin_version() < RQSPIN_VERSION) ...
 * Cannot fail. Async-signal-safe.
 */
RQSPIN_API unsigned int rqspin_version(void);

/* The same as a string, "major.minor.patch" (static storage, never NULL).
 * Cannot fail. Async-signal-safe. */
RQSPIN_API const char *rqspin_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* RQSPIN_VERSION_H */
