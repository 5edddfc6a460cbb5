package testkit_test

import (
	"context"
	"fmt"
	"log"

	"github.com/conclave-ai/conclave"
	"github.com/conclave-ai/conclave/testkit"
	"github.com/conclave-ai/conclave/tool"
)

// A program's own tool, whose first call fails: the run still finishes,
// the model got the failure as an error result, and the run's events keep
// every ordering guarantee of docs/events.md. (In a test,
// testkit/conclavetest runs the engine for you, under virtual time: see
// the README, "Testing your council".)
func ExampleNewFaultyTool() {
	type lookup struct {
		Query string `json:"query"`
	}
	search, err := tool.Func("search", "Look something up in the team wiki.",
		func(ctx context.Context, in lookup) (string, error) { return "The wiki has a page on " + in.Query, nil })
	if err != nil {
		log.Fatal(err)
	}
	failsOnce := testkit.NewFaultyTool(search, testkit.OnCalls(testkit.Fault{Err: testkit.ErrInjected}, 1))

	e, err := conclave.New(conclave.Options{Tools: []tool.Tool{failsOnce}})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	ctx := context.Background()
	run, err := e.Start(ctx, conclave.RunRequest{Question: "Why is the sky blue?",
		Scenario: &conclave.Scenario{Nodes: 3, ToolsPerNode: 1}})
	if err != nil {
		log.Fatal(err)
	}
	var events []*conclave.Envelope
	for ev, err := range e.Follow(ctx, run) {
		if err != nil {
			log.Fatal(err)
		}
		events = append(events, ev)
	}

	failed := 0
	for _, ev := range events {
		if p, ok := ev.Payload.(*conclave.ToolCallFinishedPayload); ok && p.IsError {
			failed++
		}
	}
	fmt.Println("the run ended with", testkit.Terminal(events, run.RunID).Type)
	fmt.Println("failed tool calls:", failed)
	fmt.Println("invariant violations:", len(testkit.Check(events)))
	// Output:
	// the run ended with run_finished
	// failed tool calls: 1
	// invariant violations: 0
}
