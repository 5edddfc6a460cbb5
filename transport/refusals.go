package transport

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/transport/internal/httpjson"
)

// maxRefusalLinesPerSecond bounds the WARN lines of refused requests: a
// client hammering the server with bad requests (or a burst of 429s)
// must not flood the log. The lines past the bound in a second are
// counted, and the next line logged says how many were left out.
const maxRefusalLinesPerSecond = 20

// refusalLog writes one WARN line per request the server refused for a
// reason the client can act on: validation (400, 413, 415, 422),
// authentication (401, 403) and quotas (429). Not found, conflicts and
// the server's own failures are not refusals.
type refusalLog struct {
	logger *slog.Logger
	now    func() time.Time

	mu         sync.Mutex // guards the rate bound below
	second     int64      // the unix second being counted
	lines      int        // lines logged in that second
	suppressed int        // lines left out since the last one logged
}

// refused reports whether an answer of status is a refusal to log.
func refused(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusTooManyRequests:
		return true
	}
	return false
}

// wrap logs the refusals of next's answers.
func (l *refusalLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := &recordingWriter{ResponseWriter: w}
		next.ServeHTTP(rw, r)
		if e := rw.err; e != nil && refused(e.Status) {
			l.log(r, e)
		}
	})
}

func (l *refusalLog) log(r *http.Request, e *httpjson.Error) {
	l.mu.Lock()
	sec := l.now().Unix()
	if sec != l.second {
		l.second, l.lines = sec, 0
	}
	if l.lines >= maxRefusalLinesPerSecond {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.lines++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	attrs := []any{"method", r.Method, "path", r.URL.Path, "status", e.Status, "code", e.Code, "reason", e.Message, "remote", r.RemoteAddr}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	l.logger.Warn("request refused", attrs...)
}

// recordingWriter keeps the error a handler answered (httpjson's
// ErrorRecorder). It unwraps to the writer it wraps, so that
// http.ResponseController (flushes, deadlines, hijacking) reaches it,
// and hijacks directly for the WebSocket upgrader, which asserts
// http.Hijacker.
type recordingWriter struct {
	http.ResponseWriter
	err *httpjson.Error
}

var (
	_ httpjson.ErrorRecorder = (*recordingWriter)(nil)
	_ http.Hijacker          = (*recordingWriter)(nil)
)

func (w *recordingWriter) RecordError(e *httpjson.Error) { w.err = e }

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recordingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}
