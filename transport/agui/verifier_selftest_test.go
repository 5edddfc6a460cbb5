package agui_test

import (
	"strings"
	"testing"
)

// TestVerifier_Catches: the Go verifier rejects what the client rejects,
// so that passing it means something.
func TestVerifier_Catches(t *testing.T) {
	t.Parallel()
	rs := `{"type":"RUN_STARTED","threadId":"t","runId":"r"}`
	cases := map[string][]string{
		"first event":        {`{"type":"STEP_STARTED","stepName":"s"}`},
		"null optional":      {rs, `{"type":"TEXT_MESSAGE_START","messageId":"m","name":null}`},
		"unknown field":      {rs, `{"type":"STEP_STARTED","stepName":"s","extra":1}`},
		"float timestamp":    {rs, `{"type":"STEP_STARTED","stepName":"s","timestamp":1.5}`},
		"unknown type":       {rs, `{"type":"THINKING_START"}`},
		"tag on RUN_*":       {`{"type":"RUN_STARTED","threadId":"t","runId":"r","subagentRunId":"s"}`},
		"open message":       {rs, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`},
		"open subagent":      {rs, `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`},
		"open step":          {rs, `{"type":"STEP_STARTED","stepName":"s"}`, `{"type":"RUN_FINISHED","threadId":"t","runId":"r"}`},
		"subagent reuse":     {rs, `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}`, `{"type":"SUBAGENT_FINISHED","subagentRunId":"s"}`, `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}`},
		"tag mismatch":       {rs, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"a"}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"b"}`},
		"content unopened":   {rs, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`},
		"unknown parent":     {rs, `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","parentSubagentRunId":"p"}`},
		"after RUN_ERROR":    {rs, `{"type":"RUN_ERROR","message":"x"}`, `{"type":"STEP_STARTED","stepName":"s"}`},
		"empty interrupts":   {rs, `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}}`},
		"bad patch":          {rs, `{"type":"STATE_SNAPSHOT","snapshot":{}}`, `{"type":"STATE_DELTA","delta":[{"op":"replace","path":"/a/b","value":1}]}`},
		"run id not echoed":  {rs, `{"type":"RUN_FINISHED","threadId":"t","runId":"other"}`},
		"restart while open": {rs, rs},
	}
	for name, frames := range cases {
		v := newVerifier("")
		var err error
		for _, f := range frames {
			if err = v.event([]byte(f)); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// And a truncated stream.
	v := newVerifier("")
	if err := v.event([]byte(rs)); err != nil {
		t.Fatal(err)
	}
	if err := v.end(); err == nil || !strings.Contains(err.Error(), "not RUN_FINISHED") {
		t.Errorf("truncated stream: %v", err)
	}
	// A valid two-run stream (an interrupt, then its resume) passes.
	v = newVerifier("t")
	for _, f := range []string{rs,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"suspended","interruptIds":["i"]}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"tool_call"}]}}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"r2"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n"}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"success"}}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"r2"}`} {
		if err := v.event([]byte(f)); err != nil {
			t.Fatalf("valid stream rejected: %v", err)
		}
	}
	if err := v.end(); err != nil {
		t.Fatal(err)
	}
}
