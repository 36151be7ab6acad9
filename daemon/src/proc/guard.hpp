#pragma once
// The step guard: a small process the worker starts beside itself, which
// outlives it.  The worker tells it, over a pipe, each step process group it
// spawns and each it reaps.  When the pipe closes with steps still live, the
// worker is gone without ending them (SIGKILL, a crash, the OOM killer): the
// guard stops what it left running, as a stop would (TERM, then KILL after
// the kill grace): each live step's process group, every process that
// carries a live step's marker (a descendant that left the group), and the
// descendants of these and what is in a group or session one of them leads
// (a descendant that left the group and cleared its environment).  So a
// step of a vanished worker does not run on beside the job's next attempt.  It
// does the same to a job's steps, the worker alive or not, once the worker
// has not renewed the job's lease in time (fence): a stopped worker's steps
// do not run on either.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace bgexec::proc::guard {

// Starts the guard (`exe __guard GRACE_S WORKER_ID`, in a process group of
// its own); false, with the reason in `error`, when it cannot be.
bool start(const std::string& exe, double grace_s, const std::string& worker_id, std::string& error);

// The guard's pid, 0 when none was started (or it is gone).
pid_t pid();

// Tell the guard of a step's group (pgid = the leader's pid) and its marker
// (see Child::spawn), and of its end once the leader is reaped.  No-ops
// without a guard.
void started(pid_t pgid, const std::string& marker);
void ended(pid_t pgid);

// Before a step with this marker is spawned: a worker killed (or stopped)
// between the spawn and started() left a process the guard was never told
// of, which ran on beside the job's next attempt (e2e 29-chaos).  The guard
// stops what carries an announced marker as it does a live step's; the
// spawn's outcome follows: started() with the same marker, or
// spawn_failed().  An empty marker (or one too long for a record) is not
// announced: nothing could find its process.
void spawning(const std::string& marker);
void spawn_failed(const std::string& marker);

// The point by which the worker must have renewed the lease of the job
// whose marker's BGEXEC_JOB_ID is `job` (its own lease guard gives the job
// up there).  Once it passes, the guard stops that job's steps itself, the
// worker alive or not: stopped (SIGSTOP, a debugger), frozen, or its event
// loop stuck.  Called when the job starts and each time its lease is
// renewed; only a job with steps running costs a record.  forget(): the job
// is over.
void fence(const std::string& job, std::chrono::steady_clock::time_point at);
void forget(const std::string& job);

// A child of this process was reaped: if it was the guard, another is
// started and told of the groups live now (once, then at most every 10 s).
// A guard found gone when a record is written is replaced the same way.
void exited(pid_t pid);

// Closes the pipe, as the worker's end does: the guard stops the steps still
// live (none after a clean exit) and exits.  The worker never needs it (its
// exit closes the pipe); tests do.
void release();

// The guard process: reads the worker's records from stdin until it closes.
// args: GRACE_S WORKER_ID (for its log).
int main(const std::vector<std::string>& args);

}  // namespace bgexec::proc::guard
