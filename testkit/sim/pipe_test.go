package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/conclave-ai/conclave/messages"
)

// TestPipeListener_Dial: dial hands the server's end to Accept and bytes
// flow both ways; cut drops the server's ends (the client reads EOF);
// after Close, Accept and dial fail.
func TestPipeListener_Dial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newPipeListener()
		accepted := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				_, err = c.Write([]byte("hello"))
			}
			accepted <- err
		}()
		client, err := l.dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 5)
		if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		l.cut()
		if _, err := client.Read(buf); !errors.Is(err, io.EOF) {
			t.Fatalf("read after cut: %v, want EOF", err)
		}
		_ = l.Close()
		if _, err := l.Accept(); !errors.Is(err, errListenerClosed) {
			t.Fatalf("Accept after Close: %v", err)
		}
		if _, err := l.dial(context.Background()); !errors.Is(err, errListenerClosed) {
			t.Fatalf("dial after Close: %v", err)
		}
	})
}

// TestClient_ReadSSE: the SSE parser takes the frames of docs/api.md
// (retry, heartbeat comments, id/event/data, the final stream_closed
// without id) and reports a frame it cannot place.
func TestClient_ReadSSE(t *testing.T) {
	c := newClient(0, 1, sse)
	c.readSSE(strings.NewReader("retry: 1000\n\n: ping\n\n"+
		"id: 7\nevent: text_delta\ndata: {\"seq\":7}\n\n"+
		"id: 8\nevent: run_finished\ndata: {\"seq\":8}\n\n"+
		"event: text_delta\ndata: {}\n\n"+
		"event: stream_closed\ndata: {\"code\":\"shutdown\",\"reason\":\"server shutting down\"}\n\n"), false, 0, nil)
	got, cursor := c.received()
	if len(got) != 2 || cursor != 8 || got[0].Seq != 7 || got[0].Type != messages.TextDelta || string(got[0].JSON) != `{"seq":7}` ||
		got[1].Seq != 8 || got[1].Type != messages.RunFinished {
		t.Fatalf("got %d events, cursor %d: %+v", len(got), cursor, got)
	}
	if c.closed["shutdown"] != 1 {
		t.Fatalf("final frames %v, want one shutdown", c.closed)
	}
	if bad := c.problems(); len(bad) != 1 || !strings.Contains(bad[0], `text_delta frame with id ""`) {
		t.Fatalf("problems %q, want the frame without id", bad)
	}
}

// TestClient_AddWS: after a subscribe frame, the old stream's events in
// flight are taken, then the restart at after+1 repeats what the client
// has (dropped, compared byte for byte), and new events follow; a restart
// anywhere else is reported.
func TestClient_AddWS(t *testing.T) {
	ev := func(seq uint64) *messages.Encoded {
		return messages.NewEncoded(seq, messages.TextDelta, "", []byte(fmt.Sprintf(`{"seq":%d}`, seq)))
	}
	c := newClient(0, 1, ws)
	for seq := uint64(1); seq <= 3; seq++ {
		c.addWS(ev(seq))
	}
	c.restart = &restart{after: 3} // as resubscribe sets it
	for _, seq := range []uint64{4, 5, 4, 5, 6} {
		c.addWS(ev(seq))
	}
	got, cursor := c.received()
	if len(got) != 6 || cursor != 6 || c.restarts != 1 || c.restart != nil || len(c.problems()) != 0 {
		t.Fatalf("%d events, cursor %d, %d restarts, pending %v, problems %q; want 6, 6, 1, none, none", len(got), cursor, c.restarts, c.restart, c.problems())
	}
	c.restart = &restart{after: 6}
	c.addWS(ev(7))
	c.addWS(ev(7)) // the restart must start at after+1: 7
	c.addWS(ev(7))
	if len(c.problems()) != 0 {
		t.Fatalf("problems %q", c.problems())
	}
	c.restart = &restart{after: 7}
	c.addWS(ev(8))
	c.addWS(ev(9))
	c.addWS(ev(9)) // a restart at 9 (a repeat of the last event): not after+1
	if bad := c.problems(); len(bad) != 1 || !strings.Contains(bad[0], "went on at seq 9") {
		t.Fatalf("problems %q, want the restart at seq 9", bad)
	}
}
