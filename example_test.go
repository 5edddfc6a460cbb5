package conclave_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/tool"
)

// A program with a tool of its own: a typed Go function, whose JSON Schema
// is generated from its argument struct. Without a model the engine runs
// the scripted one, whose workers call the tool named "search"
// (Scenario.ToolsPerNode times each): this one replaces the scripted search.
func Example() {
	type lookup struct {
		Query string `json:"query" jsonschema:"what to look up"`
	}
	var calls atomic.Int64
	search, err := tool.Func("search", "Look something up in the team wiki.",
		func(ctx context.Context, in lookup) (string, error) {
			calls.Add(1)
			return "The wiki has a page on " + in.Query, nil
		})
	if err != nil {
		log.Fatal(err)
	}
	e, err := conclave.New(conclave.Options{Tools: []tool.Tool{search}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Shutdown(context.Background())

	ctx := context.Background()
	run, err := e.Start(ctx, conclave.RunRequest{
		Question: "Why is the sky blue?",
		Scenario: &conclave.Scenario{Nodes: 3, ToolsPerNode: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range e.Follow(ctx, run) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type == conclave.RunFinished || ev.Type == conclave.RunError {
			fmt.Println("the run ended with", ev.Type)
		}
	}
	fmt.Println("search was called", calls.Load(), "times")
	// Output:
	// the run ended with run_finished
	// search was called 3 times
}

// oneNode is a model of its own: its director plans one node, the node's
// worker answers, and the synthesiser writes the answer from the node's
// output. Each turn is one Text chunk and its Usage; a real backend
// streams many chunks per turn.
type oneNode struct{}

func (oneNode) Name() string { return "one-node" }

func (oneNode) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	var text string
	switch req.Role {
	case model.RoleDirector: // the plan, as JSON (messages.Plan)
		text = `{"nodes": [{"id": "optics", "goal": "Explain how air scatters sunlight"}]}`
	case model.RoleWorker:
		text = "Air scatters blue light more than red."
	case model.RoleSynthesizer: // req.Context holds the nodes' outputs
		text = fmt.Sprintf("From %d finding: the sky is blue because air scatters blue light most.", len(req.Context))
	default:
		return nil, fmt.Errorf("%w: no %s turns", model.ErrModel, req.Role)
	}
	usage := &model.Usage{Model: "one-node"}
	usage.Usage.OutputTokens = int64(len(strings.Fields(text)))
	return &chunks{ctx: ctx, next: []model.Chunk{&model.Text{Text: text}, usage}}, nil
}

// chunks streams a fixed list of chunks.
type chunks struct {
	ctx  context.Context
	next []model.Chunk
}

func (c *chunks) Recv() (model.Chunk, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.next) == 0 {
		return nil, io.EOF
	}
	ch := c.next[0]
	c.next = c.next[1:]
	return ch, nil
}

func (c *chunks) Close() error { return nil }

// A model of the program's own (oneNode, above), run to its end.
func ExampleNew_customModel() {
	e, err := conclave.New(conclave.Options{Model: oneNode{}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Shutdown(context.Background())

	ctx := context.Background()
	run, err := e.Start(ctx, conclave.RunRequest{Question: "Why is the sky blue?"})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range e.Follow(ctx, run) {
		if err != nil {
			log.Fatal(err)
		}
		switch p := ev.Payload.(type) {
		case *conclave.RunFinishedPayload:
			fmt.Printf("%s: %s\n%d node, %d output tokens\n", ev.Type, p.Answer, p.Nodes.Completed, p.Usage.OutputTokens)
		case *conclave.RunErrorPayload:
			fmt.Printf("%s: %s\n", ev.Type, p.Message)
		}
	}
	// Output:
	// run_finished: From 1 finding: the sky is blue because air scatters blue light most.
	// 1 node, 29 output tokens
}

// The SSE stream mounted on the program's own mux, behind its own
// authentication, read with a plain HTTP client.
func ExampleEngine_SSEHandler() {
	e, err := conclave.New(conclave.Options{})
	if err != nil {
		log.Fatal(err)
	}

	auth := func(r *http.Request) (conclave.Tenant, error) {
		if r.Header.Get("Authorization") != "Bearer let-me-in" {
			return "", errors.New("unknown token")
		}
		return "acme", nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /events", e.SSEHandler(auth))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer e.Shutdown(context.Background()) // first: it ends the streams

	ctx := context.Background()
	run, err := e.Start(ctx, conclave.RunRequest{Tenant: "acme", Question: "Why is the sky blue?"})
	if err != nil {
		log.Fatal(err)
	}
	url := srv.URL + "/events?until=run_end&session_id=" + string(run.SessionID)
	resp, err := http.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	fmt.Println("without a token:", resp.Status)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer let-me-in")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var events []string
	for lines := bufio.NewScanner(resp.Body); lines.Scan(); {
		if typ, ok := strings.CutPrefix(lines.Text(), "event: "); ok {
			events = append(events, typ)
		}
	}
	fmt.Println("first:", events[0])
	fmt.Println("last:", strings.Join(events[len(events)-2:], ", "))
	// Output:
	// without a token: 401 Unauthorized
	// first: run_started
	// last: run_finished, stream_closed
}
