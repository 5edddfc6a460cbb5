package actors_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/actors"
	"github.com/conclave-ai/conclave/journal"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/testkit"
)

// filesSeen records, per agent, the files of the model requests it made.
type filesSeen struct {
	model.Model
	mu   *sync.Mutex
	seen map[string][]messages.RunFile // by role:agent
}

func newFilesSeen() filesSeen {
	return filesSeen{mu: &sync.Mutex{}, seen: map[string][]messages.RunFile{}}
}

func (m filesSeen) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	m.mu.Lock()
	m.seen[req.Role.String()+":"+req.AgentID] = req.Files
	m.mu.Unlock()
	return m.Model.Stream(ctx, req)
}

func (m filesSeen) factory(sc messages.Scenario) (model.Model, error) {
	sm, err := scripted.New(sc)
	if err != nil {
		return nil, err
	}
	m.Model = sm
	return m, nil
}

// check fails t unless every agent the model saw got exactly want (by
// name and bytes), and the director, a worker and the synthesiser were
// among them.
func (m filesSeen) check(t *testing.T, want []messages.InputFile) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	roles := map[string]bool{}
	for agent, got := range m.seen {
		roles[strings.SplitN(agent, ":", 2)[0]] = true
		if len(got) != len(want) {
			t.Errorf("%s saw %d files, want %d", agent, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
				t.Errorf("%s file %d: %s %q, want %s %q", agent, i, got[i].Name, got[i].Data, want[i].Name, want[i].Data)
			}
		}
	}
	for _, r := range []string{"director", "worker", "synthesizer"} {
		if !roles[r] {
			t.Errorf("no %s turn seen (%v)", r, roles)
		}
	}
}

// fakeFetcher serves files by URL from a map.
type fakeFetcher struct {
	files map[string]string
	err   error
}

func (f fakeFetcher) FetchFile(_ context.Context, url string, max int64) ([]byte, string, error) {
	if f.err != nil {
		return nil, "", f.err
	}
	body, ok := f.files[url]
	if !ok {
		return nil, "", errors.New("404 Not Found")
	}
	if int64(len(body)) > max {
		return nil, "", &messages.FileError{Code: messages.FileTooLarge, Problem: "too long"}
	}
	return []byte(body), "text/plain; charset=utf-8", nil
}

// TestEngine_StartRunFiles: the files a run starts with, inline and by
// URL (fetched before the run starts), are recorded with their bytes in
// run_started and given to every agent of the run.
func TestEngine_StartRunFiles(t *testing.T) {
	t.Parallel()
	m := newFilesSeen()
	e := testkit.NewEngine(t, actors.Config{Models: m.factory,
		FileFetcher: fakeFetcher{files: map[string]string{"https://files.example/b.txt": "fetched text"}}})
	files := []messages.InputFile{{Name: "a.md", Data: []byte("# inline")}, {Name: "b.txt", URL: "https://files.example/b.txt"}}
	ref, events := testkit.RunCouncil(t, e, messages.StartRun{Question: "q", Files: files, Scenario: &messages.Scenario{Nodes: 2, Waves: 1}})
	testkit.AssertInvariants(t, events)
	started := events[0].Payload.(*messages.RunStartedPayload)
	if len(started.Files) != 2 || started.Files[1].URL != "https://files.example/b.txt" || string(started.Files[1].Data) != "fetched text" ||
		started.Files[1].MediaType != "text/plain" || started.Files[0].MediaType != "text/markdown" {
		t.Fatalf("run_started files %+v", started.Files)
	}
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("ended with %s", term.Type)
	}
	m.check(t, []messages.InputFile{files[0], {Name: "b.txt", Data: []byte("fetched text")}})
	if files[1].Data != nil {
		t.Fatal("StartRun changed the request's files")
	}
}

// TestEngine_StartRunFilesRefused: a URL file without a fetcher, a
// fetch that fails, and a URL file that also has data are refused before
// the run starts, each with its code.
func TestEngine_StartRunFilesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := []messages.InputFile{{Name: "b.txt", URL: "https://files.example/b.txt"}}
	for _, tc := range []struct {
		name    string
		fetcher actors.FileFetcher
		files   []messages.InputFile
		code    messages.FileErrorCode
	}{
		{"no fetcher", nil, url, messages.FileURLNotAllowed},
		{"fetch fails", fakeFetcher{err: errors.New("connection refused")}, url, messages.FileFetchFailed},
		{"not allowed", fakeFetcher{err: &messages.FileError{Code: messages.FileURLNotAllowed, Problem: "no"}}, url, messages.FileURLNotAllowed},
		{"too large", fakeFetcher{files: map[string]string{url[0].URL: strings.Repeat("x", messages.MaxFileBytes+1)}}, url, messages.FileTooLarge},
		{"data and url", fakeFetcher{}, []messages.InputFile{{Name: "b.txt", URL: url[0].URL, Data: []byte("x")}}, messages.FileInvalid},
		// Two inline files of 300 KiB leave the URL 40 KiB of the run's 640 KiB.
		{"over the run's rest", fakeFetcher{files: map[string]string{url[0].URL: strings.Repeat("x", 100<<10)}},
			[]messages.InputFile{url[0], {Name: "a.txt", Data: make([]byte, 300<<10)}, {Name: "c.txt", Data: make([]byte, 300<<10)}}, messages.FilesTooLarge},
	} {
		e := testkit.NewEngine(t, actors.Config{FileFetcher: tc.fetcher})
		_, err := e.StartRun(ctx, messages.StartRun{Question: "q", Files: tc.files})
		var fe *messages.FileError
		if !errors.Is(err, actors.ErrInvalidRequest) || !errors.As(err, &fe) || fe.Code != tc.code || fe.Index != 0 {
			t.Errorf("%s: %v; want an invalid request with code %s", tc.name, err, tc.code)
		}
	}
}

// TestRecover_RunFilesAfterRestart: a run parked on its plan gate when
// the server stops gives its agents the same files after the restart
// (from run_started; nothing is fetched again).
func TestRecover_RunFilesAfterRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := &restartable{t: t, j: &sessionsJournal{Memory: journal.NewMemory()}}
	first := newFilesSeen()
	r.cfg = actors.Config{Models: first.factory, FileFetcher: fakeFetcher{files: map[string]string{"https://files.example/b.txt": "fetched once"}}}
	r.start()
	t.Cleanup(func() { _ = r.e.Shutdown(context.Background()) })
	files := []messages.InputFile{{Name: "a.md", Data: []byte("# inline")}, {Name: "b.txt", URL: "https://files.example/b.txt"}}
	ref, err := r.e.StartRun(ctx, messages.StartRun{Question: "q", SessionID: "f", HITL: messages.HITLPlan, Files: files, Scenario: &messages.Scenario{Nodes: 2}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := testkit.NewProbe(ctx, r.e, "", "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Until(ctx, func(env *messages.Envelope) bool { return env.Type == messages.InterruptRaised }); err != nil {
		t.Fatal(err)
	}
	p.Close()
	second := newFilesSeen()
	// The URL now serves something else, or nothing: it is not fetched again.
	r.cfg = actors.Config{Models: second.factory, FileFetcher: fakeFetcher{err: errors.New("must not be fetched again")}}
	r.restart()
	p, err = testkit.NewProbe(ctx, r.e, "", "f", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	approveGates(ctx, t, r.e, p, testkit.TerminalOf(ref.RunID))
	events := r.all("f")
	testkit.AssertInvariants(t, events)
	if term := testkit.Terminal(events, ref.RunID); term.Type != messages.RunFinished {
		t.Fatalf("ended with %s", term.Type)
	}
	second.mu.Lock()
	delete(second.seen, "director:director") // planned before the restart
	second.mu.Unlock()
	want := []messages.InputFile{files[0], {Name: "b.txt", Data: []byte("fetched once")}}
	second.mu.Lock()
	n := len(second.seen)
	second.mu.Unlock()
	if n == 0 {
		t.Fatal("no agent ran after the restart")
	}
	for agent, got := range second.seen {
		if len(got) != 2 || !bytes.Equal(got[0].Data, want[0].Data) || !bytes.Equal(got[1].Data, want[1].Data) {
			t.Errorf("after the restart %s saw %+v", agent, got)
		}
	}
}
