package httpapi

// ShellMessage is a text message of the shell WebSocket (ShellPath), either way: "resize" (rows,
// cols) and "signal" (signal: INT, TERM, HUP, QUIT, KILL, USR1, USR2, WINCH, TSTP, CONT) from
// the client; "started" (shell_id), "exit" (exit_status, exit_signal) and "error" from the
// server. An "error" without a code refuses a client's text message and the shell goes on; one
// with a code (a Connect error code: resource_exhausted when the session has its most shells,
// invalid_argument for a program the host refuses) says why the shell could not start or
// ended, and the server closes the socket after it, the same words in the close reason.
// Terminal bytes travel as binary messages.
type ShellMessage struct {
	Type       string `json:"type"`
	Rows       uint32 `json:"rows,omitempty"`
	Cols       uint32 `json:"cols,omitempty"`
	Signal     string `json:"signal,omitempty"`
	ShellID    string `json:"shell_id,omitempty"`
	ExitStatus *int32 `json:"exit_status,omitempty"`
	// ExitSignal is the signal that killed the program, when one did.
	ExitSignal int32 `json:"exit_signal,omitempty"`
	// Message says what was wrong ("error").
	Message string `json:"message,omitempty"`
	// Code is the Connect code of an "error" that ends the shell; "" when the shell goes on.
	Code string `json:"code,omitempty"`
}

// GetExitStatus is the exit status of an "exit" message (0 when absent).
func (m ShellMessage) GetExitStatus() int32 {
	if m.ExitStatus == nil {
		return 0
	}
	return *m.ExitStatus
}

// Shell message types.
const (
	ShellResize  = "resize"
	ShellSignal  = "signal"
	ShellStarted = "started"
	ShellExit    = "exit"
	ShellError   = "error"
)
