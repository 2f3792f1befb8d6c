/* thread_exit.h (internal) — run a function when the calling thread exits: the per-thread slots
 * that park memory for reuse (the record decoder's, the query cursor's, the transaction's) free
 * what they hold then.
 */
#ifndef RL_BASE_THREAD_EXIT_H
#define RL_BASE_THREAD_EXIT_H

#define RL_THREAD_AT_EXIT_MAX 8 /* functions per thread */

/* rl__thread_at_exit — call fn() once when the calling thread exits (pthread_exit or its start
 * routine returning; not the main thread returning from main: the process's exit returns that
 * memory). Functions run in the reverse order of registration; registering fn again on the same
 * thread changes nothing. Returns 1 when fn is registered for this thread (now or before), 0 when
 * it cannot be (RL_THREAD_AT_EXIT_MAX functions already, or no pthread key could be made): the
 * caller then keeps nothing per thread. fn must not register functions itself. Thread-safe. */
int rl__thread_at_exit(void (*fn)(void));

#endif
