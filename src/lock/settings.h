/* SPDX-License-Identifier: MIT */
/* The process-wide lock settings (settings.c). */
#ifndef RQSPIN_LOCK_SETTINGS_H
#define RQSPIN_LOCK_SETTINGS_H

#include <stdint.h>

/* Default timeout T in ns (see rqspin_set_default_timeout). */
uint64_t rqs_lock_default_timeout(void);

#endif
