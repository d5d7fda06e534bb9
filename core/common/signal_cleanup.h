// Removing this process's shared-memory objects when a signal ends it.
//
// A rank holds names in /dev/shm only while a communicator is set up: each
// is unlinked once every peer has mapped it. A rank ended in that window by
// SIGTERM, SIGINT, SIGHUP or SIGQUIT (a launcher such as mpirun, srun or
// torchrun passing on a cancel, Ctrl-C in a terminal, a closed session)
// would die by the signal's default action and leave them; the next job on
// the host, or omniccl-run after its ranks, removes them, but a job started
// another way may have no next job for a long time. So every name this
// process creates is entered in a fixed table that a signal handler can walk
// without locks or allocation (the handler may interrupt any thread, one
// holding the allocator's lock included), and the handler unlinks every name
// in it, restores the signal's default action and raises the signal again:
// the process still ends "killed by SIGTERM", as its launcher expects.
//
// The handlers are installed once per process, at the first registration,
// and only for those of the four signals whose disposition is then SIG_DFL:
// an application's own handler (Python's SIGINT handler, a training loop's
// SIGTERM checkpoint) and an ignored signal (nohup) are never replaced. An
// application that installs its own handler later replaces ours; what its
// process leaves is then removed by the next job or the launcher, as before.
// OMNICCL_SIGNAL_CLEANUP=0 installs nothing.
#pragma once

#include <string>

namespace omniccl {

/// OMNICCL_SIGNAL_CLEANUP (default on); throws Error(kInvalidArgument)
/// naming the setting for a value other than 0 or 1.
bool signal_cleanup_enabled();

/// Enters shared-memory object `name` ("/omniccl...") in the table, to be
/// unlinked if a terminating signal ends this process; installs the handlers
/// first if none were yet (once, unless OMNICCL_SIGNAL_CLEANUP=0). Returns
/// its slot, or -1 when the table is full or the name too long (the object
/// is then left to the next job, as it would be without the table). Throws
/// only for a malformed OMNICCL_SIGNAL_CLEANUP.
int register_shm_object(const std::string& name);

/// Removes the entry of `slot` (from register_shm_object; -1 is ignored),
/// once the name is unlinked.
void unregister_shm_object(int slot);

/// How many objects the table holds now (for tests).
int registered_shm_objects();

}  // namespace omniccl
