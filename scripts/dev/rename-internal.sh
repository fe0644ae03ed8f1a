#!/usr/bin/env bash
# Gives every non-static internal symbol of the library the one internal
# prefix, rqs_ (docs/design.md, "Code conventions"), and spells the
# allocator's and storage's branch hints and sanitizer tests the common way
# (src/common/compiler.h). Idempotent: a second run changes nothing, so it
# can be re-run after merging work that still uses the old names.
#
#   bash scripts/dev/rename-internal.sh      # from anywhere in the tree
#
# Scope: src/, the tests and benchmarks written in C, and the docs that
# name internal functions. tests/pkg_static/clash.c is left alone: it
# defines functions with the old internal names on purpose (a program may
# use them; the prelinked librqspin.a must not clash).
# A new internal function needs no entry here: give it the prefix when you
# write it. The export check (tests/check_exports.cmake, exported_symbols_
# whitebox) lists any global symbol of the objects that lacks it.
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"

# Global functions and variables that had no prefix (lock, arch, valgrind,
# allocator, storage).
names=(
  # lock
  deadlock_find deadlock_ghost_holder deadlock_ghost_taker deadlock_holder
  deadlock_live_taker deadlock_wait_begin deadlock_wait_end deadlock_waiter
  failure_count failure_report_build report_fill_thread report_emit report_wanted
  lock_default_timeout futex_wait futex_wait_ns futex_wake
  held_abandon held_by held_claim_ghost_entry held_drain held_holds_any held_release_entry
  pshared_lock_slowpath registry_candidate_clear registry_candidate_find
  registry_candidate_mark registry_has_ghosts registry_high_water registry_in_use
  registry_slot stall_thread_cpu_ns stall_thread_state stats_retire
  # arch
  arch_now_ns
  # valgrind
  drd_fresh drd_hb_after drd_hb_before drd_lock_post drd_private drd_record drd_unlock_pre
  hg_fresh hg_hb_after hg_hb_before hg_lock_post hg_lock_pre hg_private hg_unlock_post
  hg_unlock_pre
  # allocator
  alloc_bad_pointer alloc_class_size alloc_corrupt alloc_empty_page alloc_gstats
  alloc_segmap alloc_tls_heap class_alloc_slow free_local_slow
  heap_at heap_attach heap_claim heap_collect_all heap_count heap_drain_deferred
  heap_flush_cache heap_process_notify heap_reap_abandoned heap_reap_one heap_release
  large_alloc large_free large_usable_size os_map os_unmap page_init page_retire
  pool_get pool_put pool_trim reserve_alloc reserve_free
  san_alloc_slow san_carve_slow san_exact san_exact_size san_free_slow segmap_init
  # storage (st_* becomes rqs_st_*)
  st_assert_not_reading st_bucket_unlock st_dead st_free_elem_now st_free_elem_rcu
  st_free_local_rcu st_free_xtab_rcu st_link_map st_local_finish_gone st_local_unlock
  st_release_embedded st_setup st_tab_insert st_tab_release_all st_tab_remove
  st_tab_reserve st_unlink_map_locked st_tsan_gp
  st_empty st_free_xtab_chain st_storage_insert st_storage_remove
  # allocator, later
  alloc_class_of8 alloc_fast_max alloc_init_fast pool_count_live
)
alt=$(IFS='|'; echo "${names[*]}")

mapfile -t files < <(git ls-files -- 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' \
  'bench/*.c' 'bench/*.h' 'bench/*.cc' 'docs/*.md' 'src/*.md' 'tests/model/README.md' |
  grep -v '^tests/pkg_static/clash\.c$')

# \b does not match between "rqs_" and the old name ('_' is a word
# character), so renamed names are not renamed again. A name already
# given a different new name (wait_yield -> rqs_os_yield) maps here too.
sed -i -E \
  -e "s/\\b(${alt})\\b/rqs_\\1/g" \
  -e 's/\bwait_yield\b/rqs_os_yield/g' \
  "${files[@]}"

# ---- src/alloc and src/storage: one spelling of the compiler facts -------
src_files=()
mapfile -t src_files < <(git ls-files -- 'src/alloc/*' 'src/storage/*' | grep -E '\.(c|h)$')
if [ ${#src_files[@]} -gt 0 ]; then
  # The two copies of "which sanitizer?" become RQS_TSAN / RQS_ASAN.
  perl -0pi -e '
    s{#if defined\(__SANITIZE_THREAD__\)\n#define (?:ST_TSAN|RQS_TSAN) 1\n#elif defined\(__has_feature\)\n#if __has_feature\(thread_sanitizer\)\n#define (?:ST_TSAN|RQS_TSAN) 1\n#endif\n#endif\n\n?}{}g;
    s{#if defined\(__SANITIZE_THREAD__\)\n(__attribute__\(\(no_sanitize\("thread"\)\)\))\n#elif defined\(__has_feature\)\n#if __has_feature\(thread_sanitizer\)\n\1\n#endif\n#endif\n}{#ifdef RQS_TSAN\n$1\n#endif\n}g;
    s{#if defined\(__SANITIZE_ADDRESS__\)\n#define ALLOC_ASAN 1\n#elif defined\(__has_feature\)\n#if __has_feature\(address_sanitizer\)\n#define ALLOC_ASAN 1\n#endif\n#endif\n}{#ifdef RQS_ASAN\n#define ALLOC_ASAN 1\n#endif\n}g;
    s{^#define (?:ST_)?(?:UN)?LIKELY\(x\)[^\n]*\n}{}mg;
    s{^#define ST_HIDDEN [^\n]*\n}{}mg;
  ' "${src_files[@]}"
  sed -i -E \
    -e 's/\b(ST_)?LIKELY\(/RQS_LIKELY(/g' \
    -e 's/\b(ST_)?UNLIKELY\(/RQS_UNLIKELY(/g' \
    -e 's/\bST_TSAN\b/RQS_TSAN/g' \
    -e 's/\bST_HIDDEN //g' \
    -e 's/__builtin_expect\(rqspin__valgrind != 0, 0\)/RQS_UNLIKELY(rqspin__valgrind != 0)/g' \
    "${src_files[@]}"
  # "Kept, never handed out again" has one name (src/common/table.h).
  sed -i -E \
    -e 's/, HEAP_LOST \}/ }/' \
    -e 's/\bHEAP_LOST\b/RQS_TABLE_RETIRED/g' \
    -e 's/enum heap_state \{ HEAP_FRESH = 0,/enum heap_state { HEAP_FRESH = RQS_TABLE_FRESH,/' \
    "${src_files[@]}"
  # The allocator's mmap wrappers are src/common/os.c's (rqs_os_map,
  # rqs_os_reserve, rqs_os_unmap): its own copies go.
  if [ -f src/alloc/pool.c ]; then
    perl -0pi -e '
      s{static void \*os_map_flags\(size_t len, int flags\)\n\{\n.*?\n\}\n\nvoid \*rqs_os_map\(size_t len\)\n\{\n.*?\n\}\n\nvoid rqs_os_unmap\(void \*p, size_t len\)\n\{\n.*?\n\}\n\n}{}s;
      s{os_map_flags\(len, MAP_NORESERVE\)}{rqs_os_reserve(len)}g;
    ' src/alloc/pool.c
    perl -0pi -e 's{^void \*rqs_os_map\(size_t len\);\nvoid rqs_os_unmap\(void \*p, size_t len\);\n}{}m' \
      src/alloc/alloc_internal.h
  fi
  # The internal headers that use those names include where they live.
  add_include() { # file, after the first line matching this regex, include line, [blank]
    [ -f "$1" ] || return 0
    grep -qF "$3" "$1" && return 0
    AFTER=$2 LINE=$3 BLANK=${4:+1} perl -0pi -e \
      's{^($ENV{AFTER})$}{$1\n@{[$ENV{BLANK} ? "\n" : ""]}$ENV{LINE}}m' "$1"
  }
  add_include src/alloc/alloc_internal.h '#include <rqspin\/alloc\.h>' '#include "common/compiler.h"'
  add_include src/alloc/alloc_internal.h '#include "common\/compiler\.h"' '#include "common/os.h"'
  add_include src/alloc/alloc_internal.h '#include "common\/os\.h"' '#include "common/table.h"'
  add_include src/alloc/sanitize.h '#include <stddef\.h>' '#include "common/compiler.h"' blank
  add_include src/storage/internal.h '#include <rqspin\/storage\.h>' '#include "common/compiler.h"' blank
fi
