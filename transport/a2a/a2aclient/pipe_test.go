package a2aclient_test

import (
	"io"
	"net/http"
	"sync"
	"testing"
)

// pipeServer serves a handler over in-memory pipes, so a stream can be
// tested in a synctest bubble (a real socket's reads are not durably
// blocking: virtual time would not advance).
type pipeServer struct {
	url    string
	client *http.Client
	wg     sync.WaitGroup
}

func newPipeServer(t *testing.T, h http.Handler) *pipeServer {
	t.Helper()
	s := &pipeServer{url: "http://pipe/a2a"}
	s.client = &http.Client{Transport: roundTripper(func(req *http.Request) (*http.Response, error) {
		pr, pw := io.Pipe()
		w := &pipeWriter{h: http.Header{}, pw: pw, ready: make(chan struct{})}
		s.wg.Add(1)
		go func() { // owned by close: it waits for every handler
			defer s.wg.Done()
			h.ServeHTTP(w, req)
			w.flushHeader()
			pw.Close()
		}()
		select {
		case <-w.ready:
		case <-req.Context().Done():
			pr.CloseWithError(req.Context().Err())
			return nil, req.Context().Err()
		}
		go func() { // owned by close: ends with the request
			<-req.Context().Done()
			pr.CloseWithError(req.Context().Err())
		}()
		return &http.Response{StatusCode: w.status, Header: w.h, Body: pr, Request: req}, nil
	})}
	return s
}

func (s *pipeServer) close() { s.wg.Wait() }

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type pipeWriter struct {
	h      http.Header
	pw     *io.PipeWriter
	status int
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.h }
func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() { w.status = code; close(w.ready) })
}
func (w *pipeWriter) flushHeader() { w.WriteHeader(http.StatusOK) }
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.flushHeader()
	return w.pw.Write(b)
}
func (w *pipeWriter) Flush() { w.flushHeader() }
