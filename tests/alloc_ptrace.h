/* SPDX-License-Identifier: MIT */
/*
 * A signal injector for the interrupt-anywhere test: delivers a signal at
 * each instruction of a marked stretch of the traced child, one
 * instruction per run of the stretch.
 *
 * The traced child (forked from the test, so it has the same addresses)
 * raises STEP_SIG_BEGIN before an operation and STEP_SIG_END after it (or
 * its thread ends), and repeats the operation, with the same set-up, for
 * as long as the tracer sets its `again` word at the end. The first run
 * is single-stepped to learn the instruction sequence: each address that
 * lies in the test executable's own code (where the allocator is linked
 * in; libc, the loader and the vDSO are stepped through but never
 * interrupted) is a position, up to `visits` occurrences of the same
 * address (which bounds loops). Each later run interrupts one position:
 * a breakpoint on its address (skipping the earlier occurrences) and, when
 * it is hit, STEP_SIG_INJECT delivered right there; the handler and the
 * rest of the run go at full speed. A run that never reaches its position
 * (the set-up did not reproduce the path) is counted as missed.
 *
 * Threads of the child are traced too (PTRACE_O_TRACECLONE).
 * x86_64 and aarch64.
 */
#ifndef RQSPIN_ALLOC_PTRACE_H
#define RQSPIN_ALLOC_PTRACE_H

#include <elf.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "test_util.h"

#define STEP_SIG_BEGIN SIGUSR1
#define STEP_SIG_END SIGUSR2
#define STEP_SIG_INJECT SIGPROF

#if defined(__x86_64__)
#define STEP_SUPPORTED 1
#define STEP_BP_ADJ 1u /* int3 reports the address after it */
#elif defined(__aarch64__)
#define STEP_SUPPORTED 1
#define STEP_BP_ADJ 0u
#else
#define STEP_SUPPORTED 0
#define STEP_BP_ADJ 0u
#endif

/* Start and end of the executable's code (GNU linkers define both). */
extern const char __executable_start[];
extern const char etext[];

enum step_mode { SM_RUN, SM_LEARN, SM_ARMED, SM_STEPOVER };

struct step_thread {
	pid_t tid;
	enum step_mode mode;
};

#define STEP_MAX_THREADS 64
#define STEP_PC_SLOTS (1u << 16)
#define STEP_MAX_POS (1u << 20)

struct step_stats {
	uint64_t steps, injections, missed, stretches, runs;
	int status;        /* waitpid status of the child's exit */
	uintptr_t last_pc; /* last interrupted (or stepped) address */
};

struct stepper {
	unsigned visits;
	uint64_t max_steps;
	/* Wall-clock budget in seconds (0: none), below CTest's timeout, so
	 * that a run that stops making progress is reported with where it
	 * was instead of being killed without a word. */
	unsigned max_seconds;
	long *again; /* the child's word: run the stretch once more */
	bool verbose;
	void (*on_stretch)(struct stepper *s, pid_t child); /* verbose report */
	struct step_thread th[STEP_MAX_THREADS];
	/* the current stretch */
	pid_t stid;
	bool in_stretch, learning;
	uint32_t npos, next;
	uintptr_t pos_pc[STEP_MAX_POS];
	uint8_t pos_occ[STEP_MAX_POS];
	uintptr_t pc_key[STEP_PC_SLOTS];
	uint8_t pc_cnt[STEP_PC_SLOTS];
	/* the breakpoint of the current run */
	bool bp_in, bp_hit;
	uintptr_t bp_addr;
	long bp_orig;
	uint32_t bp_skip;
	/* Addresses breakpoints were planted at, lately: a thread that hit
	 * one just before another thread's hit (or the end of the run)
	 * removed it reports its trap afterwards, and must be rewound onto
	 * the restored instruction (x86-64: int3 reports the next byte). */
	uintptr_t bp_past[64];
	uint32_t bp_past_n;
	struct step_stats st;
};

static bool step_getregs(pid_t tid, uintptr_t *pc, uintptr_t *sp, bool set, uintptr_t newpc)
{
#if defined(__x86_64__)
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, tid, NULL, &r) != 0)
		return false;
	*pc = r.rip;
	*sp = r.rsp;
	if (set) {
		r.rip = newpc;
		return ptrace(PTRACE_SETREGS, tid, NULL, &r) == 0;
	}
#elif defined(__aarch64__)
	/* glibc's <sys/user.h> name for the kernel's user_pt_regs (the
	 * NT_PRSTATUS layout); the kernel's name is in <asm/ptrace.h> only. */
	struct user_regs_struct r;
	struct iovec io = { &r, sizeof(r) };

	if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &io) != 0)
		return false;
	*pc = r.pc;
	*sp = r.sp;
	if (set) {
		r.pc = newpc;
		return ptrace(PTRACE_SETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &io) == 0;
	}
#else
	(void)tid;
	(void)set;
	(void)newpc;
	*pc = *sp = 0;
	return false;
#endif
	return true;
}

static struct step_thread *step_thread_of(struct stepper *s, pid_t tid)
{
	for (int i = 0; i < STEP_MAX_THREADS; i++)
		if (s->th[i].tid == tid)
			return &s->th[i];
	for (int i = 0; i < STEP_MAX_THREADS; i++)
		if (s->th[i].tid == 0) {
			s->th[i] = (struct step_thread){ .tid = tid, .mode = SM_RUN };
			return &s->th[i];
		}
	fprintf(stderr, "stepper: too many threads\n");
	abort();
}

/* Count one occurrence of pc; returns the occurrence number. */
static unsigned step_pc_count(struct stepper *s, uintptr_t pc)
{
	uint32_t i = (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> 48);

	for (;;) {
		if (s->pc_key[i] == pc || s->pc_key[i] == 0) {
			s->pc_key[i] = pc;
			if (s->pc_cnt[i] < 255)
				s->pc_cnt[i]++;
			return s->pc_cnt[i] - 1u;
		}
		i = (i + 1) & (STEP_PC_SLOTS - 1);
	}
}

static void step_resume(pid_t tid, enum __ptrace_request how, int sig)
{
	if (ptrace(how, tid, NULL, (void *)(uintptr_t)sig) != 0 && errno != ESRCH) {
		perror("stepper: ptrace resume");
		abort();
	}
}

static void step_poke_text(pid_t pid, uintptr_t addr, long word)
{
	if (ptrace(PTRACE_POKETEXT, pid, (void *)addr, (void *)word) != 0) {
		perror("stepper: poke text");
		abort();
	}
}

static long step_bp_word(long orig)
{
#if defined(__x86_64__)
	return (long)(((unsigned long)orig & ~0xfful) | 0xccul); /* int3 */
#else
	return (long)(((unsigned long)orig & ~0xfffffffful) | 0xd4200000ul); /* brk #0 */
#endif
}

static void step_bp_plant(struct stepper *s, pid_t pid)
{
	step_poke_text(pid, s->bp_addr, step_bp_word(s->bp_orig));
	s->bp_in = true;
	s->bp_past[s->bp_past_n++ % 64] = s->bp_addr;
}

static bool step_bp_was(const struct stepper *s, uintptr_t addr)
{
	for (uint32_t i = 0; i < 64 && i < s->bp_past_n; i++)
		if (s->bp_past[i] == addr)
			return true;
	return false;
}

static void step_bp_remove(struct stepper *s, pid_t pid)
{
	if (s->bp_in)
		step_poke_text(pid, s->bp_addr, s->bp_orig);
	s->bp_in = false;
}

/* A run of the current stretch begins: learn it, or arm its position.
 * (Memory of the child is read and written through a thread that is
 * stopped: `child` is the one that reported this stop.) */
static void step_run_begin(struct stepper *s, struct step_thread *t, pid_t child)
{
	s->st.runs++;
	if (!s->in_stretch) {
		s->in_stretch = true;
		s->stid = t->tid;
		s->npos = s->next = 0;
		memset(s->pc_cnt, 0, sizeof(s->pc_cnt));
		memset(s->pc_key, 0, sizeof(s->pc_key));
		s->st.stretches++;
		s->learning = true;
		t->mode = SM_LEARN;
		step_resume(t->tid, PTRACE_SINGLESTEP, 0);
		return;
	}
	s->stid = t->tid;
	s->bp_addr = s->pos_pc[s->next];
	s->bp_skip = s->pos_occ[s->next];
	s->bp_hit = false;
	errno = 0;
	s->bp_orig = ptrace(PTRACE_PEEKTEXT, child, (void *)s->bp_addr, NULL);
	CHECK(errno == 0);
	step_bp_plant(s, child);
	t->mode = SM_ARMED;
	step_resume(t->tid, PTRACE_CONT, 0);
}

/* A run ended: next position, or the stretch is done. */
static void step_run_end(struct stepper *s, pid_t child)
{
	long more;

	if (s->learning) {
		s->learning = false;
		s->next = 0;
	} else {
		if (s->bp_in) {
			step_bp_remove(s, child);
			s->st.missed++;
		}
		s->next++;
	}
	more = s->next < s->npos;
	if (!more) {
		s->in_stretch = false;
		if (s->verbose && s->on_stretch)
			s->on_stretch(s, child);
	}
	s->bp_addr = 0;
	if (ptrace(PTRACE_POKEDATA, child, (void *)s->again, (void *)more) != 0) {
		perror("stepper: poke again");
		abort();
	}
}

/* One single-step stop of the learning run. */
static void step_learn(struct stepper *s, struct step_thread *t)
{
	uintptr_t pc, sp;

	if (step_getregs(t->tid, &pc, &sp, false, 0)) {
		s->st.steps++;
		s->st.last_pc = pc;
		if (pc >= (uintptr_t)__executable_start && pc < (uintptr_t)etext) {
			unsigned occ = step_pc_count(s, pc);

			if (occ < s->visits && s->npos < STEP_MAX_POS) {
				s->pos_pc[s->npos] = pc;
				s->pos_occ[s->npos] = (uint8_t)occ;
				s->npos++;
			}
		}
	}
	step_resume(t->tid, PTRACE_SINGLESTEP, 0);
}

/* A breakpoint trap (or the step over one). */
static void step_trap(struct stepper *s, struct step_thread *t, pid_t child)
{
	uintptr_t pc, sp;

	if (t->mode == SM_STEPOVER) {
		if (!s->bp_hit && s->bp_addr)
			step_bp_plant(s, child);
		t->mode = t->tid == s->stid ? SM_ARMED : SM_RUN;
		step_resume(t->tid, PTRACE_CONT, 0);
		return;
	}
	if (!step_getregs(t->tid, &pc, &sp, false, 0)) {
		step_resume(t->tid, PTRACE_CONT, 0);
		return;
	}
	if (!s->bp_in || pc - STEP_BP_ADJ != s->bp_addr) {
		/* A breakpoint already removed (see bp_past): run the
		 * restored instruction. Else not ours. */
		if (STEP_BP_ADJ && step_bp_was(s, pc - STEP_BP_ADJ))
			CHECK(step_getregs(t->tid, &pc, &sp, true, pc - STEP_BP_ADJ));
		step_resume(t->tid, PTRACE_CONT, 0);
		return;
	}
	step_bp_remove(s, child);
	CHECK(step_getregs(t->tid, &pc, &sp, true, s->bp_addr));
	if (t->tid == s->stid && s->bp_skip == 0) {
		s->bp_hit = true;
		s->st.injections++;
		s->st.last_pc = s->bp_addr;
		t->mode = SM_RUN;
		step_resume(t->tid, PTRACE_CONT, STEP_SIG_INJECT);
		return;
	}
	if (t->tid == s->stid)
		s->bp_skip--;
	t->mode = SM_STEPOVER;
	step_resume(t->tid, PTRACE_SINGLESTEP, 0);
}

static uint64_t step_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static void step_tick(int sig)
{
	(void)sig; /* only interrupts the tracer's waitpid */
}

/* Ends the tick (stepper_main), before the waits and the output that
 * follow the trace: an EINTR there would cut them short. */
static void step_tick_stop(void)
{
	struct itimerval off = { { 0, 0 }, { 0, 0 } };

	(void)setitimer(ITIMER_REAL, &off, NULL);
}

/* Gives up on the child. A tracee whose threads all sit in ptrace stops
 * was seen to keep the SIGKILL pending (the tracer's wait for its exit
 * then never returned): the caller returns and the test exits, and
 * PTRACE_O_EXITKILL kills the child with its tracer. Exits already made
 * are reaped without waiting. */
static void step_kill(pid_t child)
{
	int status;

	step_tick_stop();
	kill(child, SIGKILL);
	while (waitpid(-1, &status, __WALL | WNOHANG) > 0)
		;
}

static bool step_out_of_time(struct stepper *s, pid_t child,
			     void (*describe)(pid_t, uintptr_t, const char *what))
{
	uintptr_t pc = 0, sp;

	fprintf(stderr, "stepper: time budget of %u s exhausted (%llu runs, %llu steps learnt, %s)\n",
		s->max_seconds, (unsigned long long)s->st.runs, (unsigned long long)s->st.steps,
		s->learning ? "learning a stretch" : "interrupting");
	/* The stretch's thread, if it is in a ptrace stop; else the last
	 * position interrupted or stepped. */
	if (!s->stid || !step_getregs(s->stid, &pc, &sp, false, 0))
		pc = s->st.last_pc;
	if (describe)
		describe(child, pc, "stuck");
	step_kill(child);
	return false;
}

/*
 * Trace child (stopped in its initial SIGSTOP after PTRACE_TRACEME) until
 * it exits. Returns false (with a message) if the step or time budget ran
 * out. `describe` is called with the child's pid, to say where it was,
 * when it dies of a signal (what: "died") or runs out of time ("stuck").
 */
static bool stepper_run(struct stepper *s, pid_t child,
			void (*describe)(pid_t, uintptr_t, const char *what))
{
	uint64_t deadline = s->max_seconds ? step_now_s() + s->max_seconds : UINT64_MAX;
	int status;

	if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) {
		fprintf(stderr, "stepper: child did not stop\n");
		return false;
	}
	CHECK(ptrace(PTRACE_SETOPTIONS, child, NULL,
		     (void *)(uintptr_t)(PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXIT |
					 PTRACE_O_EXITKILL)) == 0);
	step_thread_of(s, child);
	step_resume(child, PTRACE_CONT, 0);
	for (;;) {
		pid_t tid = waitpid(-1, &status, __WALL);
		struct step_thread *t;
		int sig, event;

		if (tid < 0) {
			if (errno != EINTR)
				return true;
			/* the tick: a child that stopped making ptrace
			 * stops (blocked, or looping untraced) */
			if (step_now_s() >= deadline)
				return step_out_of_time(s, child, describe);
			continue;
		}
		t = step_thread_of(s, tid);
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			t->tid = 0;
			if (tid == child) {
				s->st.status = status;
				return true;
			}
			continue;
		}
		if (!WIFSTOPPED(status))
			continue;
		if (step_now_s() >= deadline)
			return step_out_of_time(s, child, describe);
		if (s->st.steps > s->max_steps) {
			fprintf(stderr, "stepper: step budget of %llu exhausted\n",
				(unsigned long long)s->max_steps);
			step_kill(child);
			return false;
		}
		sig = WSTOPSIG(status);
		event = status >> 16;
		if (event == PTRACE_EVENT_EXIT) {
			/* a thread that ends inside its stretch ends the run */
			if (s->in_stretch && tid == s->stid && t->mode != SM_RUN)
				step_run_end(s, tid);
			step_resume(tid, PTRACE_CONT, 0);
			continue;
		}
		if (event) { /* clone: the new thread stops by itself */
			step_resume(tid, t->mode == SM_LEARN ? PTRACE_SINGLESTEP : PTRACE_CONT, 0);
			continue;
		}
		switch (sig) {
		case STEP_SIG_BEGIN:
			step_run_begin(s, t, tid);
			continue;
		case STEP_SIG_END:
			if (s->in_stretch && tid == s->stid)
				step_run_end(s, tid);
			t->mode = SM_RUN;
			step_resume(tid, PTRACE_CONT, 0);
			continue;
		case SIGSTOP: /* a new thread's first stop */
			step_resume(tid, PTRACE_CONT, 0);
			continue;
		case SIGTRAP:
			if (t->mode == SM_LEARN)
				step_learn(s, t);
			else
				step_trap(s, t, tid);
			continue;
		default: {
			uintptr_t pc = 0, sp;

			/* A signal of the child's own (a crash, an abort):
			 * say where, then deliver it. */
			if (sig == SIGSEGV || sig == SIGBUS || sig == SIGABRT || sig == SIGILL ||
			    sig == SIGFPE) {
				step_getregs(tid, &pc, &sp, false, 0);
				if (describe)
					describe(tid, pc, "died");
			}
			step_resume(tid, t->mode == SM_LEARN || t->mode == SM_STEPOVER
						 ? PTRACE_SINGLESTEP
						 : PTRACE_CONT,
				    sig);
			continue;
		}
		}
	}
}

/* ---- the child's side ---- */

/* Set by the tracer at the end of a run: run the stretch once more. */
static volatile long step_again_word __attribute__((aligned(8)));

/* Whether to repeat the stretch just run (the loop's condition). */
static bool step_again(void)
{
	long a = step_again_word;

	step_again_word = 0;
	return a != 0;
}

/* A marker for the tracer (STEP_SIG_BEGIN, STEP_SIG_END), to this very
 * thread. */
static void step_mark(int sig)
{
	static __thread pid_t tid;

	if (!tid)
		tid = (pid_t)syscall(SYS_gettid);
	syscall(SYS_tgkill, getpid(), tid, sig);
}

/* The injected signal runs inject; the markers only stop us for the
 * tracer. */
static void step_child_signals(void (*inject)(int))
{
	struct sigaction sa = { .sa_handler = inject };

	CHECK(sigaction(STEP_SIG_INJECT, &sa, NULL) == 0);
	signal(STEP_SIG_BEGIN, SIG_IGN);
	signal(STEP_SIG_END, SIG_IGN);
}

/* ---- the parent's side ---- */

/* A word of the traced child (forked from us: same addresses). */
static long step_peek(pid_t pid, const void *addr)
{
	errno = 0;
	return ptrace(PTRACE_PEEKDATA, pid, (void *)addr, NULL);
}

/* LeakSanitizer cannot work in a traced process (the header is included
 * once per test program). */
#if defined(__SANITIZE_ADDRESS__)
#define STEP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STEP_ASAN 1
#endif
#endif
#ifdef STEP_ASAN
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "detect_leaks=0";
}
#endif

/* What the parent reads of the child to say where it was: the name of
 * the operation under way and the handler's mode (the child's variables;
 * same addresses), and the modes' names. Set before stepper_main. */
static struct {
	const char *const volatile *opname;
	const volatile int *mode;
	const char *const *mode_names;
	int nmodes;
} step_labels;

static const char *step_label_mode(pid_t pid)
{
	int mode = (int)step_peek(pid, (const void *)step_labels.mode);

	return mode >= 0 && mode < step_labels.nmodes ? step_labels.mode_names[mode] : "none";
}

static const char *step_label_op(pid_t pid)
{
	const char *name = (const char *)step_peek(pid, (const void *)step_labels.opname);

	return name ? name : "?";
}

/* The child died of a signal at pc, or is stuck there. */
static void step_describe(pid_t pid, uintptr_t pc, const char *what)
{
	fprintf(stderr, "child %s during \"%s\", handler %s, at pc %p\n", what, step_label_op(pid),
		step_label_mode(pid), (void *)pc);
}

/* A stretch is done (verbose). */
static void step_on_stretch(struct stepper *s, pid_t pid)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "  %-45s %-6s %5u positions (%llu runs, %llu missed so far) %ld.%03ld\n",
		step_label_op(pid), step_label_mode(pid), s->npos,
		(unsigned long long)s->st.runs, (unsigned long long)s->st.missed,
		(long)ts.tv_sec, ts.tv_nsec / 1000000);
}

/*
 * The parent's side of an interrupt-anywhere test: fork the child, which
 * runs child_main (it must exit) traced, step it with s (set up by the
 * caller; step_labels too), and print the totals under name. Returns the test's exit
 * status: 0, 1 when the child failed, 77 when ptrace is not permitted.
 */
static int stepper_main(struct stepper *s, const char *name, void (*child_main)(void))
{
	struct timespec t0, t1;
	pid_t child;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fflush(NULL);
	child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
			perror("PTRACE_TRACEME");
			_exit(77);
		}
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		raise(SIGSTOP);
		child_main();
		_exit(0);
	}
	s->on_stretch = step_on_stretch;
	s->again = (long *)&step_again_word;
	if (s->max_seconds) {
		/* A one-second tick without SA_RESTART: waitpid returns
		 * EINTR, and the budget is checked even when the child makes
		 * no ptrace stop at all. */
		struct sigaction sa = { .sa_handler = step_tick };
		struct itimerval it = { { 1, 0 }, { 1, 0 } };

		sigemptyset(&sa.sa_mask);
		CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
		CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
	}
	if (!stepper_run(s, child, step_describe))
		return 1;
	step_tick_stop();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%s: %llu operations, %llu runs, %llu steps learnt, %llu interruptions, "
	       "%llu positions not reached, %.1f s\n",
	       name, (unsigned long long)s->st.stretches, (unsigned long long)s->st.runs,
	       (unsigned long long)s->st.steps, (unsigned long long)s->st.injections,
	       (unsigned long long)s->st.missed,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	if (WIFEXITED(s->st.status) && WEXITSTATUS(s->st.status) == 77) {
		printf("%s: skipped (ptrace not permitted)\n", name);
		return 77;
	}
	if (!WIFEXITED(s->st.status) || WEXITSTATUS(s->st.status) != 0) {
		fprintf(stderr, "%s: child failed (status %#x, last pc %p)\n", name, s->st.status,
			(void *)s->st.last_pc);
		return 1;
	}
	return 0;
}

#endif /* RQSPIN_ALLOC_PTRACE_H */
