// Package supervisor owns the in-sandbox process supervisor and the host's client for it.
//
// Every sandbox is a runc container whose PID 1 is cmd/hangar-supervisor, which runs [Serve].
// The host reaches it through a unix socket the host binds outside the sandbox and hands to it as
// an inherited descriptor, so one resident process forks each command instead of a ~45 ms
// `runc exec`. The supervisor reaps every
// child (orphans included), keeps each exec's output in memory for re-attach, and forgets finished
// execs after a retention period.
//
// # Protocol
//
// One unix connection per call. The client writes one request: a JSON object ([Request]) ending
// in a newline, at most 1 MiB (an exec's stdin included, base64-encoded: a little under 768 KiB
// of stdin fits), and then keeps its write side open: EOF from the client means it has gone, and
// an exec or attach stream stops (the exec does not). The server answers with frames and then
// closes the connection. A longer request is a "bad_request" error; [Client] refuses to send one.
// A frame is a 5-byte header — one kind byte and a big-endian uint32 payload length — and the
// payload:
//
//	's' started  JSON [Started]: the first frame of an exec or attach
//	'o' stdout   8-byte big-endian absolute offset, then the bytes
//	'e' stderr   same as stdout
//	'x' exit     JSON [Exit]: the last frame of an exec or attach
//	'p' pong     JSON [Health]: the answer to ping
//	'k' ok       JSON {}: the answer to cancel and stdin
//	'!' error    JSON [Error]: the last frame of any call that failed
//
// Operations (Request.Op):
//
//   - "exec": starts Argv in its own process group, as a child subreaper (tree.go), stdout and
//     stderr on separate pipes, then streams like attach from offset 0. Stdin is a pipe the
//     supervisor writes Request.Stdin to and then closes, or /dev/null when Stdin is empty;
//     whatever is still unwritten when every reader has closed stdin, or when the main process
//     exits, is dropped. With KeepStdin the
//     pipe stays open after Stdin (even an empty one) for "stdin" requests, until one closes it
//     or the main process exits. An ExecID that already
//     exists attaches to that exec instead of starting a second process (Started.Attached is
//     true, and the request's Stdin is ignored); an empty ExecID gets one assigned. A spawn
//     failure is an error frame with code "spawn_failed" and a [SpawnFailure] reason; hosts map
//     "not_found" to exit status 127 and "not_executable" to 126, as shells do
//     ([SpawnFailure.ShellExitStatus]).
//   - "attach": replays stdout and stderr from the given absolute offsets, follows them live, and
//     ends with the exit frame: nothing lost, nothing doubled. An offset older than what is
//     retained (each stream keeps only its newest StreamCap bytes) is an "offset_dropped" error
//     naming the stream and the oldest retained offset.
//   - "cancel": SIGKILLs the exec's whole process tree — every process it started, in whatever
//     process group or session, orphans included (tree.go) — and its process group; its exit
//     says canceled. Canceling a finished exec is a no-op.
//   - "stdin": writes Request.Stdin to the stdin of an exec started with KeepStdin, after
//     whatever was written to it before, and closes it when CloseStdin; the answer is ok once
//     the bytes are in the pipe (the process may not have read them yet). Writes are serialized
//     per exec. A write to a process that does not read blocks until it reads, exits, or is
//     killed (a client that leaves does not stop it). An exec not started with KeepStdin, or
//     whose stdin is closed (its process exited included), is a "stdin_closed" error; the size
//     is bounded by the request line's.
//   - "pty": starts Argv as a session leader on a new pseudo-terminal of Rows x Cols, and keeps
//     the connection two-way until the program has exited: see pty.go for the frames the
//     client sends (input, resize, signal) and for what EOF from the client means (hang-up).
//     Its output comes as stdout frames; nothing is retained for re-attach.
//   - "dial": connects to Port on the sandbox's loopback and, after an ok frame, relays raw
//     bytes both ways (see dial.go); a port nothing listens on is a "dial_failed" error.
//   - "ping": health and counts, including the last activity (exec start, exit, attach) so the
//     host can find idle sandboxes.
//
// A client that disconnects never affects the exec: it keeps running and its output keeps
// accumulating. The exec's environment is the supervisor's own (the container's process env)
// overlaid with Request.Env, with a default PATH when neither sets one; PATH lookup of Argv[0]
// uses that environment.
//
// When the exec's main process exits, output still held open by a process it left behind is
// read for OutputGrace more and then the pipes are closed, so a backgrounded daemon cannot hold
// the exit frame back forever.
package supervisor
