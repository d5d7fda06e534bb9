// Which thread issues operations on a communicator: one at a time, and
// without an atomic read-modify-write per call for a thread that keeps
// issuing.
//
// A call that enters with a compare-and-swap (a full barrier) waits there
// for this rank's last writes into a peer's shared-memory ring to complete,
// a cross-core transfer: a fifth of an 8-byte broadcast's call on its root.
// So a thread that has issued kKeepAfter calls in a row keeps the issuer
// between calls, and then enters and leaves with plain stores: it raises a
// busy flag and checks that it still keeps the issuer. Another thread takes
// the issuer from its keeper with a compare-and-swap followed by a
// process-wide memory barrier (membarrier(2), PRIVATE_EXPEDITED: every
// thread of the process passes a full barrier), after which the keeper's
// busy flag is visible and any entry of the keeper sees that it lost the
// issuer: the rare side pays for the common one (as the shared-memory
// link's sleep handshake does). Where the kernel lacks that barrier, every
// call enters with the compare-and-swap.
// Each keeping thread has a busy flag of its own (a slot), so that a former
// keeper that read its keeper word just before it lost the issuer, and
// raises and lowers its flag after that, cannot touch the flag of the
// thread that keeps the issuer now. A communicator has kSlots of them, one
// per thread that has kept it; further threads do not keep it (every call
// of theirs takes the issuer with the compare-and-swap).
#pragma once

#include <atomic>
#include <cstdint>

namespace omniccl {

class Issuer {
 public:
  /// How a thread entered: first (leave() it), inside its own call
  /// (nothing to leave), or refused because another thread is in a call.
  enum class Entry { kEntered, kEnteredKept, kNested, kBusy };
  /// Calls in a row by one thread after which it keeps the issuer.
  static constexpr unsigned kKeepAfter = 16;

  /// Enters a call on this thread.
  Entry enter();
  /// Ends a call entered as `how` (kEntered or kEnteredKept).
  void leave(Entry how);
  /// Waits until no other thread is in a call, taking the issuer from a
  /// keeper (abort: nothing may use the communicator afterwards). Bounded
  /// by the running call's return.
  void drain();
  /// (Tests.) Enters as this thread would have if it had read the issuer's
  /// state when it last kept it, and another thread took the issuer before
  /// the entry went on: a former keeper late to its entry.
  Entry enter_as_former_keeper();
  /// Whether this thread keeps the issuer between calls now (tests).
  bool kept_by_this_thread() const;
  /// Whether process-wide barriers are available, so that threads may keep
  /// the issuer (registers for them the first time).
  static bool can_keep();
  /// Whether can_keep() has its answer. The first can_keep() registers the
  /// process for those barriers, which waits for an RCU grace period (10 to
  /// 15 ms measured on a 2-core VM): Communicator::create runs it beside the
  /// rendezvous, so that no call pays for it.
  static bool prepared();

 private:
  /// A keeping thread's busy flag: set while it is in a call entered without
  /// the compare-and-swap. `owner` (a thread's id) is set once, when the
  /// thread first keeps the issuer, and stays (a later thread with the same
  /// id takes the slot over: the earlier one has ended).
  struct alignas(64) Slot {
    std::atomic<uintptr_t> owner{0};
    std::atomic<bool> busy{false};
  };
  static constexpr int kSlots = 8;

  /// enter() once it has read the keeper's slot `seen_slot`, then word_ `w`.
  Entry enter_seen(Slot* seen_slot, uintptr_t w);
  /// The slot of thread `me`, or nullptr.
  Slot* slot_of(uintptr_t me);
  /// slot_of(me), claiming a free slot if it has none; nullptr when every
  /// slot is another thread's.
  Slot* slot_for(uintptr_t me);

  /// 0: nobody; a thread's id: it is in a call (entered by compare-and-swap);
  /// id | kKeeps: that thread keeps it (in a call while its slot is busy).
  std::atomic<uintptr_t> word_{0};
  /// The slot of the thread that keeps the issuer (written before word_ names
  /// that thread as keeper, by the thread holding word_).
  std::atomic<Slot*> keeper_slot_{nullptr};
  Slot slots_[kSlots];
  // Written only by the thread holding word_ as its plain id.
  uintptr_t last_ = 0;  ///< the thread of the last compare-and-swap entry
  unsigned run_ = 0;    ///< its entries in a row
};

}  // namespace omniccl
