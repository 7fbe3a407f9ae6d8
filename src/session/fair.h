/* Fair CPU shares among sessions (docs/PERFORMANCE.md, "Fairness under load"): every second
 * a thread of the manager reads each live session's CPU time from its cgroup, keeps a decaying
 * average of the CPUs it used, and lowers the cgroup's CPU weight of a session that used much
 * recently, so that sessions that rarely run (a person's notebook beside a batch of agents)
 * keep their latency. The busy sessions of one tenant share one weight between them, so that a
 * tenant with many busy sessions gets no more CPU than a tenant with one. A quiet session gets
 * its full weight back as its average decays. The arithmetic is here, apart from the thread,
 * so that unit tests can check it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The time constant of the decaying average: CPU used 10 s ago counts 1/e as much as now. */
#define FAIR_DECAY_MS 10000
/* A session whose average is at least this many CPUs counts as busy for its tenant's share. */
#define FAIR_BUSY_CPUS 0.05
/* How strongly use lowers the weight of a busy session: 100 / (1 + FAIR_SLOPE * average CPUs);
 * a session that is not busy weighs the default 100. */
#define FAIR_SLOPE 10.0

/* fair_state.weight when the cgroup's weight is not known: the next step writes it. */
#define FAIR_WEIGHT_UNKNOWN UINT32_MAX

struct fair_state {
        uint64_t last_usec;  /* the cgroup's CPU time at the last sample */
        uint64_t last_ns;    /* when (monotonic); 0: no sample yet */
        double avg_cpus;     /* the decaying average of CPUs used */
        uint32_t weight;     /* the weight last written; 0: the cgroup's default, never written */
        const void *sandbox; /* whose cgroup the samples are of: another one starts over */
};

/* Folds a new sample (the cgroup's total CPU time usec at now_ns) into st. Returns the CPUs
 * used since the last sample (0 on the first). A counter that went back (a new cgroup under the
 * same session after a resume) starts over. */
double fair_sample(struct fair_state *st, uint64_t usec, uint64_t now_ns);

/* The weight (1-100, on cgroup v2's scale) for a session with average avg_cpus whose tenant
 * has busy_in_tenant busy sessions (this one included when it is busy): 100 for a quiet
 * session, lower the more it used, divided among its tenant's busy sessions. */
uint32_t fair_weight(double avg_cpus, unsigned busy_in_tenant);

/* Whether a session with this average counts as busy. */
bool fair_is_busy(double avg_cpus);

struct session_manager;
/* One step, once a second: samples every live session's CPU time and writes the weights that
 * changed (one pread per session, a write only on a change). */
void session_fair_step(struct session_manager *mgr);
/* The fairness thread's body (arg: the manager): session_fair_step() and
 * session_pressure_step() once a second until the manager stops. */
void *session_fair_main(void *arg);
