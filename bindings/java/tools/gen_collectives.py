#!/usr/bin/env python3
"""Writes src/main/java/org/omniccl/ArrayCollectives.java: the public
overloads of every collective (and point-to-point call) for each primitive array type, for direct
ByteBuffers and for DeviceBuffers (CUDA device pointers), blocking and
non-blocking, each delegating to one generic method (doAllReduce, ...) with
the per-call options of the object it is called on (options(): none on a
Communicator, the given ones on the view Communicator.withOptions returns).

It also writes MessageReceives.java: the overloads of Message.recv (a
matched probe's receive), from MESSAGE_OPS.

Run after changing the tables below:  python3 bindings/java/tools/gen_collectives.py
`--check` exits 1 if the checked-in file differs (bindings/java/ci.sh runs it).
"""
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent.parent / "src/main/java/org/omniccl/ArrayCollectives.java"
MESSAGE_OUT = OUT.with_name("MessageReceives.java")

ARRAYS = ["byte", "short", "int", "long", "float", "double", "boolean"]

# name, summary, params, generic call, per-param docs.
# Param kinds: B:<name>:<dir>[:nullable]  buffer (dir: IN read, OUT fully written,
#   INOUT read or written in part: v-variant outputs keep the elements they skip);  I:<name> int;  C:<name> int[];  O:<name> ReduceOp
OPS = [
    ("allReduce", "Reduces {@code data} with {@code op} across all ranks, in place: afterwards every rank holds the same (bit-identical) result.",
     ["B:data:INOUT", "O:op"], "doAllReduce({data}, {data}, op, options(), {is_async})"),
    ("allReduce", "Reduces every rank's {@code send} with {@code op} into every rank's {@code recv} (same length); every rank gets the same (bit-identical) result.",
     ["B:send:IN", "B:recv:OUT", "O:op"], "doAllReduce({send}, {recv}, op, options(), {is_async})"),
    ("scan", "Inclusive prefix reduction (MPI_Scan), in place: rank i's {@code data} becomes {@code op} over the data of ranks 0 to i (same length everywhere). AVG and pre-multiplied sums have no prefix meaning (InvalidArgumentException).",
     ["B:data:INOUT", "O:op"], "doScan({data}, {data}, op, false, options(), {is_async})"),
    ("scan", "Inclusive prefix reduction (MPI_Scan): rank i's {@code recv} gets {@code op} over the {@code send} of ranks 0 to i (same length everywhere). AVG and pre-multiplied sums have no prefix meaning (InvalidArgumentException).",
     ["B:send:IN", "B:recv:OUT", "O:op"], "doScan({send}, {recv}, op, false, options(), {is_async})"),
    ("exscan", "Exclusive prefix reduction (MPI_Exscan), in place: rank i > 0's {@code data} becomes {@code op} over the data of ranks 0 to i - 1; rank 0's keeps its values.",
     ["B:data:INOUT", "O:op"], "doScan({data}, {data}, op, true, options(), {is_async})"),
    ("exscan", "Exclusive prefix reduction (MPI_Exscan): rank i > 0's {@code recv} gets {@code op} over the {@code send} of ranks 0 to i - 1; rank 0's {@code recv} keeps its values.",
     ["B:send:IN", "B:recv:INOUT", "O:op"], "doScan({send}, {recv}, op, true, options(), {is_async})"),
    ("broadcast", "Copies the root's {@code data} into {@code data} on every rank (in place; same length everywhere).",
     ["B:data:INOUT", "I:root"], "doBroadcast({data}, root, options(), {is_async})"),
    ("reduce", "Reduces every rank's {@code send} with {@code op} into the root's {@code recv} (same length as send); non-root inputs are never modified.",
     ["B:send:IN", "B:recv:OUT:nullable", "O:op", "I:root"], "doReduce({send}, {recv}, op, root, options(), {is_async})"),
    ("gather", "Collects every rank's {@code send} (n elements each) into the root's {@code recv} (size() * n elements, in rank order).",
     ["B:send:IN", "B:recv:OUT:nullable", "I:root"], "doGather({send}, {recv}, root, options(), {is_async})"),
    ("scatter", "Splits the root's {@code send} (size() * n elements) into size() parts; rank i receives part i in {@code recv} (n elements).",
     ["B:send:IN:nullable", "B:recv:OUT", "I:root"], "doScatter({send}, {recv}, root, options(), {is_async})"),
    ("allGather", "Concatenates every rank's {@code send} (n elements each) into every rank's {@code recv} (size() * n elements, in rank order).",
     ["B:send:IN", "B:recv:OUT"], "doAllGather({send}, {recv}, options(), {is_async})"),
    ("reduceScatter", "Reduces {@code send} (size() * n elements) with {@code op} across ranks; rank i receives reduced part i in {@code recv} (n elements).",
     ["B:send:IN", "B:recv:OUT", "O:op"], "doReduceScatter({send}, {recv}, op, options(), {is_async})"),
    ("allToAll", "Part j of rank i's {@code send} (size() equal parts) becomes part i of rank j's {@code recv} (same length as send).",
     ["B:send:IN", "B:recv:OUT"], "doAllToAll({send}, {recv}, options(), {is_async})"),
    ("allGatherv", "allGather with per-rank counts: rank i contributes {@code recvCounts[i]} elements (its whole {@code send}), placed at {@code recvDispls[i]} of every rank's {@code recv}.",
     ["B:send:IN", "B:recv:INOUT", "C:recvCounts", "D:recvDispls"], "doAllGatherv({send}, {recv}, recvCounts, recvDispls, options(), {is_async})"),
    ("allToAllv", "allToAll with per-peer counts: {@code sendCounts[j]} elements at {@code sendDispls[j]} go to rank j, {@code recvCounts[i]} elements from rank i land at {@code recvDispls[i]}; sendCounts[j] on rank i must equal recvCounts[i] on rank j.",
     ["B:send:IN", "C:sendCounts", "D:sendDispls", "B:recv:INOUT", "C:recvCounts", "D:recvDispls"],
     "doAllToAllv({send}, sendCounts, sendDispls, {recv}, recvCounts, recvDispls, options(), {is_async})"),
    ("gatherv", "gather with per-rank counts: rank i's whole {@code send} lands at {@code recvDispls[i]} of the root's {@code recv}; {@code recvCounts[i]} must equal its length.",
     ["B:send:IN", "B:recv:INOUT:nullable", "C:recvCounts:nullable", "D:recvDispls", "I:root"],
     "doGatherv({send}, {recv}, recvCounts, recvDispls, root, options(), {is_async})"),
    ("scatterv", "scatter with per-rank counts: the root sends {@code sendCounts[i]} elements at {@code sendDispls[i]} of its {@code send} to rank i's {@code recv}.",
     ["B:send:IN:nullable", "C:sendCounts:nullable", "D:sendDispls", "B:recv:OUT", "I:root"],
     "doScatterv({send}, sendCounts, sendDispls, {recv}, root, options(), {is_async})"),
    ("send", "Sends {@code data} to rank {@code peer}; matched, in order, by a {@code recv} of the same length on the peer.",
     ["B:data:IN", "I:peer"], "doSend({data}, peer, options(), {is_async})"),
    ("recv", "Receives into {@code data} from rank {@code peer}; the peer's matching {@code send} has the same length.",
     ["B:data:OUT", "I:peer"], "doRecv({data}, peer, options(), {is_async})"),
    # MPI-style point-to-point (C ABI 1.2). Receive buffers are upper bounds,
    # so they are INOUT: elements past the message keep their values.
    ("send", "Sends {@code data} to rank {@code dest} (or {@link Communicator#PROC_NULL}: nothing happens) with {@code tag}; matched by a receive on dest whose source and tag fit (MPI_Send).",
     ["B:data:IN", "I:dest", "I:tag"], "doSendTagged({data}, dest, tag, false, options(), {is_async})"),
    ("ssend", "Synchronous send (MPI_Ssend): as {@code send(data, dest, tag)}, but completes only once a receive on {@code dest} has matched the message (a probe does not). Blocking to this rank itself with no receive posted is a MismatchException (use ssendAsync).",
     ["B:data:IN", "I:dest", "I:tag"], "doSendTagged({data}, dest, tag, true, options(), {is_async})"),
    ("recv", "Receives into {@code data} the first message from {@code source} ({@link Communicator#ANY_SOURCE}, {@link Communicator#PROC_NULL} or a rank) with {@code tag} (or {@link Communicator#ANY_TAG}) (MPI_Recv). {@code data} is an upper bound: a shorter message fills its first part (the rest keeps its values), a longer one is a TruncatedException (data holds the message's first part), another element type a MismatchException; the communicator stays usable.",
     ["B:data:INOUT", "I:source", "I:tag"], "doRecvTagged({data}, source, tag, options(), {is_async})", {"ret": "RecvStatus", "cancel": True}),
    ("sendrecv", "Sends {@code send} to {@code dest} with {@code sendTag} and receives into {@code recv} from {@code source} with {@code recvTag}, both in progress at once, so ranks that exchange never deadlock (MPI_Sendrecv). recv is an upper bound, as for recv(data, source, tag).",
     ["B:send:IN", "I:dest", "I:sendTag", "B:recv:INOUT", "I:source", "I:recvTag"],
     "doSendrecv({send}, dest, sendTag, {recv}, source, recvTag, options())", {"ret": "RecvStatus", "blocking_only": True}),
]

# Message.recv: the overloads of a matched probe's receive (MessageReceives.java).
MESSAGE_OPS = [
    ("recv", "Receives this message into {@code data} (MPI_Mrecv): exactly the message the matched probe took, never waiting for a peer. {@code data} is an upper bound, as for Communicator.recv(data, source, tag); the message is spent whatever the outcome.",
     ["B:data:INOUT"], "doMrecv({data}, {is_async})", {"ret": "RecvStatus"}),
]

PARAM_DOC = {
    "data": "the buffer",
    "send": "the data this rank contributes",
    "recv": "where the result goes",
    "op": "how values are combined",
    "root": "the rank at the centre of the operation",
    "peer": "the other rank",
    "recvCounts": "elements from each rank, size() entries",
    "recvDispls": "where each rank's elements start in recv, or null for packed in rank order",
    "sendCounts": "elements for each rank, size() entries",
    "sendDispls": "where each rank's elements start in send, or null for packed in rank order",
    "dest": "the receiving rank, or Communicator.PROC_NULL",
    "source": "the sending rank, Communicator.ANY_SOURCE or Communicator.PROC_NULL",
    "tag": "the message tag, 0 to Communicator.TAG_UB (receives: also Communicator.ANY_TAG)",
    "sendTag": "the tag of the message sent, 0 to Communicator.TAG_UB",
    "recvTag": "the tag of the message received, or Communicator.ANY_TAG",
}


def method(name, summary, params, call, jtype, is_async, flags=None):
    flags = flags or {}
    result = flags.get("ret")
    bytebuffer = jtype == "ByteBuffer"
    device = jtype == "DeviceBuffer"  # carries its own type, no array
    sig, docs, binds = [], [], {}
    for p in params:
        kind, pname, *rest = p.split(":")
        nullable = "nullable" in rest
        if kind == "B":
            direction = rest[0]
            sig.append(f"{jtype}{'' if bytebuffer or device else '[]'} {pname}")
            d = PARAM_DOC[pname]
            if nullable:
                d += " (may be null on non-roots)"
            docs.append((pname, d))
            if bytebuffer:
                binds[pname] = f'Buf.of({pname}, type, "{pname}", Buf.{direction})'
            else:
                binds[pname] = f'Buf.of({pname}, "{pname}", Buf.{direction})'
        elif kind in ("C", "D"):
            sig.append(f"int[] {pname}")
            d = PARAM_DOC[pname]
            if nullable:
                d += " (may be null on non-roots)"
            docs.append((pname, d))
        elif kind == "I":
            sig.append(f"int {pname}")
            docs.append((pname, PARAM_DOC[pname]))
        elif kind == "O":
            if bytebuffer:
                sig.append("DataType type")
                docs.append(("type", "the element type of the buffers"))
            sig.append(f"ReduceOp {pname}")
            docs.append((pname, PARAM_DOC[pname]))
    if bytebuffer and not any(p.startswith("O:") for p in params):
        # the type follows the buffers
        last_buf = max(i for i, p in enumerate(params) if p.startswith(("B:", "C:", "D:")))
        sig.insert(last_buf + 1, "DataType type")
        docs.insert(last_buf + 1, ("type", "the element type of the buffers"))
    mname = name + ("Async" if is_async else "")
    if result:
        ret = f"CompletableFuture<{result}>" if is_async else result
    else:
        ret = "CompletableFuture<Void>" if is_async else "void"
    pre = []
    for pn in list(binds):
        if call.count("{" + pn + "}") > 1:  # in place: one buffer, staged once
            pre.append(f"    Buf buf = {binds[pn]};")
            binds[pn] = "buf"
    body_call = call.format(is_async="true" if is_async else "false", **binds)
    lines = ["  /**", f"   * {summary}"]
    if is_async:
        lines.append("   * Non-blocking: starts the operation; the buffers must not be touched until the future completes.")
    lines.append("   *")
    for pn, d in docs:
        lines.append(f"   * @param {pn} {d}")
    if flags.get("cancel") and is_async:
        lines.insert(lines.index("   *"), "   * {@code cancel(true)} on the future cancels the receive if no message has matched it yet (MPI_Cancel); the future is then cancelled and data untouched, else cancel returns false and it completes as usual.")
    if is_async and result:
        lines.append("   * @return a future completing with the receive's status (source, tag, bytes, count), or exceptionally with its OmniCCLException")
    elif is_async:
        lines.append("   * @return a future completing when the operation has, or exceptionally with its OmniCCLException")
    else:
        if result:
            lines.append("   * @return the receive's status: source, tag, bytes and count received")
        lines.append("   * @throws OmniCCLException if the operation fails (timeout, peer failure, mismatch, ...)")
    lines.append("   */")
    lines.append(f"  public final {ret} {mname}({', '.join(sig)}) {{")
    lines += pre
    if result and not is_async:
        body_call += ".join()" if not flags.get("blocking_only") else ""
    lines.append(f"    {'return ' if is_async or result else ''}{body_call};")
    lines.append("  }")
    return "\n".join(lines)


def overloads(ops):
    """The public overloads of every op: each array type, ByteBuffer, DeviceBuffer; blocking and async."""
    out = []
    for name, summary, params, call, *rest in ops:
        flags = rest[0] if rest else {}
        out.append(f"  // ---- {name}({', '.join(p.split(':')[1] for p in params)})")
        out.append("")
        for jtype in ARRAYS + ["ByteBuffer", "DeviceBuffer"]:
            for is_async in (False, True):
                if is_async and flags.get("blocking_only"):
                    continue
                out.append(method(name, summary, params, call, jtype, is_async, flags))
                out.append("")
    return out


def java_file(cls, doc, abstracts, ops):
    """One generated source: the header every generated file shares (origin,
    package, imports), the package-private abstract class `cls` with its
    class comment (`doc`, one line each), its abstract members (`abstracts`,
    one declaration or comment line each) and the overloads of `ops`."""
    out = [
        "// Generated by bindings/java/tools/gen_collectives.py; do not edit by hand.",
        "package org.omniccl;",
        "",
        "import java.nio.ByteBuffer;",
        "import java.util.concurrent.CompletableFuture;",
        "",
        "/**",
    ]
    out += [f" * {line}" for line in doc]
    out += [" */", f"abstract class {cls} {{", f"  {cls}() {{}}", ""]
    out += ["  " + a for a in abstracts] + [""]
    out += overloads(ops)
    out[-1] = "}"
    return "\n".join(out) + "\n"


def generate_message():
    return java_file(
        "MessageReceives",
        ["The typed overloads of {@link Message}'s receive, for each primitive array",
         "type, for direct ByteBuffers and for {@link DeviceBuffer}s, blocking and",
         "non-blocking; {@link Message} implements the generic method they call."],
        ["abstract CompletableFuture<RecvStatus> doMrecv(Buf data, boolean async);"],
        MESSAGE_OPS)


def generate():
    generics = [
        "abstract CompletableFuture<Void> doAllReduce(Buf send, Buf recv, ReduceOp op, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doScan(Buf send, Buf recv, ReduceOp op, boolean exclusive, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doBroadcast(Buf data, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doReduce(Buf send, Buf recv, ReduceOp op, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doGather(Buf send, Buf recv, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doScatter(Buf send, Buf recv, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doAllGather(Buf send, Buf recv, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doReduceScatter(Buf send, Buf recv, ReduceOp op, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doAllToAll(Buf send, Buf recv, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doAllGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doAllToAllv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv, int[] recvCounts, int[] recvDispls, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doGatherv(Buf send, Buf recv, int[] recvCounts, int[] recvDispls, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doScatterv(Buf send, int[] sendCounts, int[] sendDispls, Buf recv, int root, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doSend(Buf data, int peer, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doRecv(Buf data, int peer, CallOptions opts, boolean async);",
        "abstract CompletableFuture<Void> doSendTagged(Buf data, int dest, int tag, boolean synchronous, CallOptions opts, boolean async);",
        "abstract CompletableFuture<RecvStatus> doRecvTagged(Buf data, int source, int tag, CallOptions opts, boolean async);",
        "abstract RecvStatus doSendrecv(Buf send, int dest, int sendTag, Buf recv, int source, int recvTag, CallOptions opts);",
        "/** The per-call options of the calls made through this object; null for defaults. */",
        "abstract CallOptions options();",
    ]
    return java_file(
        "ArrayCollectives",
        ["The typed overloads of every collective, for each primitive array type,",
         "for direct ByteBuffers and for {@link DeviceBuffer}s, blocking and",
         "non-blocking; {@link Communicator} implements the generic methods they call."],
        generics,
        OPS)


if __name__ == "__main__":
    outputs = {OUT: generate(), MESSAGE_OUT: generate_message()}
    if "--check" in sys.argv[1:]:
        stale = [path for path, text in outputs.items() if not path.exists() or path.read_text() != text]
        for path in stale:
            print(f"{path} is out of date: run python3 {pathlib.Path(__file__).name}", file=sys.stderr)
        sys.exit(1 if stale else 0)
    for path, text in outputs.items():
        path.write_text(text)
        print(f"wrote {path} ({text.count(chr(10))} lines)")
