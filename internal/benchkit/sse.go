package benchkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// SSEFrame is one Server-Sent Events frame. Its slices point into the
// scanner's buffer and are valid until the next call to Next.
type SSEFrame struct {
	ID    []byte
	Event []byte
	// Data is the frame's data; several data lines are joined with '\n'.
	// A frame without data (a comment such as a heartbeat) has nil Data.
	Data []byte
	// ReadAt is when the read that completed the frame returned.
	ReadAt time.Time
}

// ErrFrameTooLong is returned by SSEScanner.Next for a frame larger than
// the scanner's limit.
var ErrFrameTooLong = errors.New("benchkit: SSE frame too long")

// SSEScanner splits an SSE stream into frames with little copying: it reads
// large chunks into one buffer and hands out frames as slices of it. Lines
// end with LF, the only ending Conclave and the baseline send; a CR before
// the LF is dropped. Not safe for concurrent use.
type SSEScanner struct {
	r          io.Reader
	now        func() time.Time
	buf        []byte
	start, end int // unread bytes are buf[start:end]
	limit      int
	readAt     time.Time
	data       []byte // joins multi-line data
	err        error
}

// NewSSEScanner reads r through a buffer of size bytes, which grows up to
// limit for a larger frame. now is the clock stamped on each read.
func NewSSEScanner(r io.Reader, size, limit int, now func() time.Time) *SSEScanner {
	return &SSEScanner{r: r, now: now, buf: make([]byte, size), limit: max(size, limit)}
}

// Reset makes s read r from the start, keeping its buffer.
func (s *SSEScanner) Reset(r io.Reader) {
	s.r, s.start, s.end, s.err = r, 0, 0, nil
}

var frameEnd = []byte("\n\n")

// Next returns the next frame. At the end of the stream it returns the
// reader's error (io.EOF for a clean end); a partial frame at the end is
// dropped.
func (s *SSEScanner) Next() (SSEFrame, error) {
	for {
		if i := bytes.Index(s.buf[s.start:s.end], frameEnd); i >= 0 {
			block := s.buf[s.start : s.start+i+1] // keep the last line's LF
			s.start += i + len(frameEnd)
			return s.parse(block), nil
		}
		if s.err != nil {
			return SSEFrame{}, s.err
		}
		if err := s.fill(); err != nil {
			return SSEFrame{}, err
		}
	}
}

// fill reads more bytes, making room first.
func (s *SSEScanner) fill() error {
	if s.start > 0 && s.start == s.end {
		s.start, s.end = 0, 0
	}
	if s.end == len(s.buf) {
		if s.start > 0 {
			s.end = copy(s.buf, s.buf[s.start:s.end])
			s.start = 0
		} else {
			if len(s.buf) >= s.limit {
				return ErrFrameTooLong
			}
			nb := make([]byte, min(2*len(s.buf), s.limit))
			s.end = copy(nb, s.buf[s.start:s.end])
			s.buf = nb
		}
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.end += n
	if n > 0 {
		s.readAt = s.now()
	}
	if err != nil {
		s.err = err
	}
	return nil
}

// parse reads the fields of one frame (each line ends with LF).
func (s *SSEScanner) parse(block []byte) SSEFrame {
	f := SSEFrame{ReadAt: s.readAt}
	dataLines := 0
	for len(block) > 0 {
		i := bytes.IndexByte(block, '\n')
		line := block[:i]
		block = block[i+1:]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 || line[0] == ':' {
			continue // comment
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "id":
			f.ID = value
		case "event":
			f.Event = value
		case "data":
			dataLines++
			switch dataLines {
			case 1:
				f.Data = value
				if f.Data == nil {
					f.Data = []byte{}
				}
			case 2:
				s.data = append(append(append(s.data[:0], f.Data...), '\n'), value...)
				f.Data = s.data
			default:
				s.data = append(append(s.data, '\n'), value...)
				f.Data = s.data
			}
		}
	}
	return f
}

// DialSSE sends a GET for the event stream at path (with the extra header
// lines, if any) over a new connection to addr, and returns the
// connection and its body once the response headers said 200
// text/event-stream. A refusal is an *SSERefusedError. ctx bounds the dial
// and the response headers, not the stream; the caller closes the
// connection.
func DialSSE(ctx context.Context, addr, path string, header http.Header) (net.Conn, io.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	dl, _ := ctx.Deadline()
	_ = conn.SetDeadline(dl)
	fail := func(err error) (net.Conn, io.Reader, error) { _ = conn.Close(); return nil, nil, err }
	var req bytes.Buffer
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n", path, addr)
	if err := header.Write(&req); err != nil {
		return fail(err)
	}
	req.WriteString("\r\n")
	if _, err := conn.Write(req.Bytes()); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, dialReadBuffer)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fail(&SSERefusedError{Status: resp.StatusCode, Body: strings.TrimSpace(string(msg))})
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, resp.Body, nil
}

// dialReadBuffer is the buffer of a dialled stream's body: large reads
// keep a client's share of the CPU small.
const dialReadBuffer = 16 << 10

// SSERefusedError is a stream request answered with something other than
// an event stream.
type SSERefusedError struct {
	Status int
	// Body is the start of the answer (a JSON error body from Conclave).
	Body string
}

func (e *SSERefusedError) Error() string {
	return fmt.Sprintf("stream refused: %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}
