package benchkit

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

type sseWant struct{ id, event, data string }

func scanAll(t *testing.T, s *SSEScanner) ([]sseWant, error) {
	t.Helper()
	var got []sseWant
	for {
		f, err := s.Next()
		if err != nil {
			return got, err
		}
		w := sseWant{string(f.ID), string(f.Event), string(f.Data)}
		if f.Data == nil {
			w.data = "<nil>"
		}
		got = append(got, w)
	}
}

func fixedClock() time.Time { return time.Unix(5, 0) }

const sseStream = "id: 1\nevent: text_delta\ndata: {\"seq\":1}\n\n" +
	": ping\n\n" +
	"id: 2\ndata: a\ndata: b\ndata:c\n\n" +
	"data\r\nid:3\r\n\n" +
	"retry: 10\nunknown: x\n\n" +
	"id: 4\ndata: partial"

var sseFrames = []sseWant{
	{"1", "text_delta", `{"seq":1}`},
	{"", "", "<nil>"},
	{"2", "", "a\nb\nc"},
	{"3", "", ""},
	{"", "", "<nil>"},
}

func TestSSEScanner_Frames(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]io.Reader{
		"whole":    strings.NewReader(sseStream),
		"bytewise": iotest.OneByteReader(strings.NewReader(sseStream)),
		"halves":   iotest.HalfReader(strings.NewReader(sseStream)),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := scanAll(t, NewSSEScanner(r, 8, 1<<10, fixedClock))
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v, want EOF", err)
			}
			if len(got) != len(sseFrames) {
				t.Fatalf("frames %q, want %q", got, sseFrames)
			}
			for i := range got {
				if got[i] != sseFrames[i] {
					t.Errorf("frame %d = %q, want %q", i, got[i], sseFrames[i])
				}
			}
		})
	}
}

func TestSSEScanner_ReadTime(t *testing.T) {
	t.Parallel()
	now := time.Unix(100, 0)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	s := NewSSEScanner(iotest.OneByteReader(strings.NewReader("data: x\n\n")), 64, 64, clock)
	f, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Unix(109, 0); !f.ReadAt.Equal(want) { // nine one-byte reads
		t.Errorf("ReadAt %v, want %v (the read that completed the frame)", f.ReadAt, want)
	}
}

func TestSSEScanner_FrameTooLong(t *testing.T) {
	t.Parallel()
	s := NewSSEScanner(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 16, 64, fixedClock)
	if _, err := s.Next(); !errors.Is(err, ErrFrameTooLong) {
		t.Errorf("err = %v, want ErrFrameTooLong", err)
	}
}

func TestSSEScanner_ReaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: ok\n\n"), iotest.ErrReader(boom))
	s := NewSSEScanner(r, 64, 64, fixedClock)
	if f, err := s.Next(); err != nil || string(f.Data) != "ok" {
		t.Fatalf("first frame %q, %v", f.Data, err)
	}
	if _, err := s.Next(); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

func TestSSEScanner_Reset(t *testing.T) {
	t.Parallel()
	s := NewSSEScanner(strings.NewReader("data: a\n\ndata: par"), 64, 64, fixedClock)
	if f, err := s.Next(); err != nil || string(f.Data) != "a" {
		t.Fatalf("first frame %q, %v", f.Data, err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want EOF", err)
	}
	s.Reset(strings.NewReader("data: b\n\n"))
	if f, err := s.Next(); err != nil || string(f.Data) != "b" {
		t.Errorf("after Reset: frame %q, %v (the partial frame and the error must be gone)", f.Data, err)
	}
}

func TestDialSSE(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("session_id") != "s1" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: "+r.Header.Get("Last-Event-ID")+"\ndata: x\n\n")
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	conn, body, err := DialSSE(ctx, addr, "/s?session_id=s1", http.Header{"Last-Event-ID": {"41"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f, err := NewSSEScanner(body, 64, 1<<10, fixedClock).Next()
	if err != nil || string(f.ID) != "41" || string(f.Data) != "x" {
		t.Errorf("frame id %q data %q, %v; want the Last-Event-ID sent back", f.ID, f.Data, err)
	}

	_, _, err = DialSSE(ctx, addr, "/s?session_id=nope", nil)
	var refused *SSERefusedError
	if !errors.As(err, &refused) || refused.Status != http.StatusNotFound || !strings.Contains(refused.Body, "not_found") {
		t.Errorf("err = %v, want an SSERefusedError 404 with the body", err)
	}
}
