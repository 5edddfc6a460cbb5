package fanout

import (
	"errors"
	"io"
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

// BenchmarkClientSSE measures a client's work per event, apart from the
// read syscalls: splitting frames and finding seq and stamp.
func BenchmarkClientSSE(b *testing.B) {
	frame := "id: 123456\nevent: text_delta\ndata: {\"id\":\"5f0c3c47-4a53-4f4b-9a4e-3f8f7d2c1b0a\",\"seq\":123456," +
		"\"type\":\"text_delta\",\"timestamp\":\"2026-11-21T08:34:41.123456789Z\",\"session_id\":\"bench\",\"run_id\":\"bench\"," +
		"\"agent_id\":\"bench\",\"lane\":{\"stream_id\":\"bench\",\"depth\":0},\"payload\":{\"delta\":\"" +
		string(AppendStamp(nil, 1_763_714_081_123_456_789, 100)) + "\"}}\n\n"
	chunk := strings.Repeat(frame, 16)
	r := strings.NewReader(chunk)
	s := NewSSEScanner(r, 32<<10, 32<<10, fixedClock)
	var c streamClient
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		f, err := s.Next()
		if err != nil {
			r.Reset(chunk)
			s.err = nil
			continue
		}
		seq, _ := parseUint(f.ID)
		stamp, ok := FindStamp(f.Data)
		c.last = seq - 1
		c.record(seq, stamp, ok, f.ReadAt)
	}
}
