package testkit

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// SSEFrame is one parsed Server-Sent Events frame. Comment is set for a
// comment line block (": ping").
type SSEFrame struct {
	ID, Event, Data, Comment string
}

// SSEReader parses an SSE stream strictly as docs/api.md specifies it: LF
// line endings only (a CR anywhere is an error), fields "id", "event",
// "data" and "retry", comments starting with ":". A block that only sets
// "retry" is not a frame: Next skips it, and Retry reports its value.
type SSEReader struct {
	r     *bufio.Reader
	retry string
}

// Retry is the value of the last "retry" field read ("" if none).
func (s *SSEReader) Retry() string { return s.retry }

// NewSSEReader reads frames from r.
func NewSSEReader(r io.Reader) *SSEReader { return &SSEReader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next frame, or io.EOF at the end of the stream.
func (s *SSEReader) Next() (SSEFrame, error) {
	var f SSEFrame
	started := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (started || line != "") {
				return f, io.ErrUnexpectedEOF
			}
			return f, err
		}
		if strings.Contains(line, "\r") {
			return f, fmt.Errorf("testkit: SSE line with CR: %q", line)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if started && f != (SSEFrame{}) {
				return f, nil
			}
			started = false // nothing but retry: no frame
			continue
		}
		started = true
		if strings.HasPrefix(line, ":") {
			f.Comment = strings.TrimSpace(strings.TrimPrefix(line, ":"))
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch name {
		case "id":
			f.ID = value
		case "event":
			f.Event = value
		case "retry":
			s.retry = value
		case "data":
			if f.Data != "" {
				f.Data += "\n"
			}
			f.Data += value
		default:
			return f, fmt.Errorf("testkit: unexpected SSE field %q", name)
		}
	}
}
