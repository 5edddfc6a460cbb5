package a2aclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/conclave-ai/conclave/transport/a2a"
)

// Stream is one SSE answer of SendStreamingMessage or SubscribeToTask.
// Its methods are for one goroutine, except Close, which may be called
// from any goroutine, more than once.
type Stream struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	body   io.ReadCloser
	r      *lineReader
	timer  *time.Timer // cancels ctx with ErrIdle; reset on every line
	idle   time.Duration
	max    int
	once   sync.Once
}

// Next returns the stream's next frame: io.EOF when the remote ended the
// stream; ErrIdle, ErrFrameTooLarge, ErrProtocol or an *a2a.RPCError (an
// "event: error" frame) otherwise.
func (s *Stream) Next() (*a2a.StreamResponse, error) {
	var data []byte
	var event string
	for {
		line, err := s.r.line()
		if err != nil {
			if cause := context.Cause(s.ctx); cause != nil && s.ctx.Err() != nil {
				if errors.Is(cause, ErrIdle) {
					return nil, fmt.Errorf("%w: nothing for %v", ErrIdle, s.idle)
				}
				return nil, cause
			}
			if errors.Is(err, io.EOF) && len(data) == 0 {
				return nil, io.EOF
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		s.timer.Reset(s.idle) // any line, a ping too, shows the remote is alive
		switch {
		case len(line) == 0: // end of a frame
			if len(data) == 0 {
				event = ""
				continue
			}
			return decodeFrame(event, data)
		case line[0] == ':': // a comment: a ping
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "data":
				if len(data)+len(value)+1 > s.max {
					return nil, fmt.Errorf("%w: over %d bytes", ErrFrameTooLarge, s.max)
				}
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, value...)
			case "event":
				event = string(value)
			}
		}
	}
}

// decodeFrame decodes one frame's data: a JSON-RPC response whose result
// is a StreamResponse.
func decodeFrame(event string, data []byte) (*a2a.StreamResponse, error) {
	var r rpcResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: frame is not JSON-RPC: %.200s", ErrProtocol, data)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if event == "error" {
		return nil, fmt.Errorf("%w: an error frame without an error", ErrProtocol)
	}
	var sr a2a.StreamResponse
	if err := r.decode(&sr); err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{sr.Task != nil, sr.Message != nil, sr.StatusUpdate != nil, sr.ArtifactUpdate != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("%w: a stream frame must set exactly one of task, message, statusUpdate, artifactUpdate (it sets %d)", ErrProtocol, n)
	}
	return &sr, nil
}

// Close ends the stream and releases its connection.
func (s *Stream) Close() error {
	s.once.Do(func() {
		s.timer.Stop()
		s.cancel(context.Canceled)
		s.body.Close()
	})
	return nil
}

// lineReader reads lines ("\n", "\r\n" or "\r"-free) of at most max bytes.
type lineReader struct {
	br  *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 16<<10), max: max}
}

// line returns the next line without its end; it is valid until the next call.
func (l *lineReader) line() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		frag, err := l.br.ReadSlice('\n')
		if len(l.buf)+len(frag) > l.max+2 {
			return nil, fmt.Errorf("%w: a line over %d bytes", ErrFrameTooLarge, l.max)
		}
		l.buf = append(l.buf, frag...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(bytes.TrimSuffix(l.buf, []byte("\n")), []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, err
		}
	}
}
