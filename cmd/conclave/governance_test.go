package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/governance"
	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/testkit"
)

// twoOfThree writes the key pairs of alice, bob and carol under dir/keys
// and a governance file whose policy needs 2 of them for high risk; it
// returns the file and each approver's private key file.
func twoOfThree(t *testing.T, dir string) (gov string, keys map[string]string) {
	t.Helper()
	keys = map[string]string{}
	for _, n := range []string{"alice", "bob", "carol"} {
		k, _, err := governance.WriteKeyPair(filepath.Join(dir, "keys"), n)
		if err != nil {
			t.Fatal(err)
		}
		keys[n] = k
	}
	gov = filepath.Join(dir, "governance.json")
	if err := os.WriteFile(gov, []byte(`{"tenants": {"local": {
		"approvers": {"alice": "keys/alice.pub", "bob": "keys/bob.pub", "carol": "keys/carol.pub"},
		"policy": {"high": {"required": 2}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return gov, keys
}

// TestGovernance_ApproveCLI: `conclave serve --governance` with a 2-of-3
// policy on high risk; a run's high-risk publish call waits; `conclave
// approve` shows its evidence and asks: answered "n", or not at all, it
// signs nothing; answered "y" it signs for alice (1 of 2, pending), a forged approval (carol's
// key under bob's name) is refused with exit 1, and bob's decides it: the
// tool runs and the stream holds both signatures and passes
// testkit.Check.
func TestGovernance_ApproveCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gov, keys := twoOfThree(t, dir)
	serverKey := filepath.Join(dir, "server.key") // created by serve, with server.key.pub beside it
	srv := startServe(t, 0, nil, "--governance", gov, "--runs-per-second", "-1", "--server-key", serverKey)
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":1,"approvals":1,"risky_approvals":1}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	var events []*messages.Envelope
	next := func() *messages.Envelope {
		t.Helper()
		env := s.mustEnv(t)
		events = append(events, env)
		return env
	}
	var id string
	for id == "" {
		if p, ok := next().Payload.(*messages.InterruptRaisedPayload); ok {
			if p.Approval == nil || p.Approval.Required != 2 || p.Evidence == nil || p.Evidence.RiskLevel != messages.RiskHigh {
				t.Fatalf("interrupt %+v", p)
			}
			id = p.InterruptID
		}
	}
	answering := func(answer, key string, extra ...string) result {
		return runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader(answer)}, append([]string{"approve", id, "--key", key, "--server", "http://" + srv.base}, extra...)...)
	}
	approve := func(key string, extra ...string) result { return answering("", key, append(extra, "--yes")...) }
	// Asked first: the evidence, then the question; no or no answer signs nothing.
	for answer, want := range map[string]string{"n\n": `not signed: you answered "n"`, "": "not signed: no answer (pass --yes"} {
		r := answering(answer, keys["alice"])
		if r.code != exitFailed || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "Sign approve of "+id+" as alice? [y/N]") {
			t.Fatalf("alice answering %q: exit %d\n%s%s", answer, r.code, r.stdout, r.stderr)
		}
		for _, shown := range []string{"[high risk]", "Reasoning:\n  - ", "Options:\n  approve: ", "(recommended)", "      then ", "Tool call: publish {", "Policy: 2 of 3 approvers to approve"} {
			if !strings.Contains(r.stderr, shown) {
				t.Fatalf("the evidence shown lacks %q:\n%s", shown, r.stderr)
			}
		}
	}
	if r := answering("y\n", keys["alice"]); r.code != 0 || !strings.Contains(r.stdout, "alice signed approve of "+id+": 1 of 2 signatures; waiting") {
		t.Fatalf("alice: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := approve(keys["carol"], "--approver", "bob"); r.code != exitFailed || !strings.Contains(r.stderr, "signature_refused") {
		t.Fatalf("forged: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := approve(keys["alice"]); r.code != exitFailed || !strings.Contains(r.stderr, "signature_duplicate") {
		t.Fatalf("alice again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := approve(keys["bob"]); r.code != 0 || !strings.Contains(r.stdout, "2 of 2 signatures; decided") {
		t.Fatalf("bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for !next().Type.Terminal() {
	}
	testkit.AssertInvariants(t, events)
	if n := testkit.Count(events, messages.ApprovalSignatureAdded); n != 2 {
		t.Fatalf("%d approval_signature_added events", n)
	}
	ran := false
	for _, env := range events {
		if p, ok := env.Payload.(*messages.ToolCallFinishedPayload); ok && p.Tool == "publish" && !p.IsError {
			ran = true
		}
	}
	if !ran {
		t.Fatal("the approved publish call did not run")
	}

	// The audit log's record of the decision carries alice's and bob's
	// signatures: `audit verify --governance` checks them against the
	// approvers' keys, and refuses them against a file without bob.
	export := filepath.Join(dir, "audit.json")
	if r := runCLI(t, t.Context(), nil, false, "audit", "export", "--server", "http://"+srv.base, "--out", export); r.code != exitOK {
		t.Fatalf("audit export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	verify := func(govFile string) result {
		return runCLI(t, t.Context(), nil, false, "audit", "verify", "--file", export, "--server-key", serverKey+".pub", "--governance", govFile)
	}
	if r := verify(gov); r.code != exitOK {
		t.Fatalf("audit verify --governance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	noBob := filepath.Join(dir, "governance-no-bob.json")
	if err := os.WriteFile(noBob, []byte(`{"tenants": {"local": {
		"approvers": {"alice": "keys/alice.pub", "carol": "keys/carol.pub"},
		"policy": {"high": {"required": 2}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := verify(noBob); r.code != exitFailed || !strings.Contains(r.stderr, `"bob" is not an approver`) {
		t.Fatalf("audit verify against approvers without bob: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestGovernance_TimeoutAcrossKillNine: a run asks for
// approval_timeout_action approve; its 2-of-3 covered publish call gets
// one signature, the server is killed with SIGKILL and started again
// while the interrupt is still pending; when it expires the call is
// rejected (timeout_action was announced as reject), the tool never
// runs, a late signature is refused, and `audit verify --governance`
// passes the log, whose expiry record carries the rule.
func TestGovernance_TimeoutAcrossKillNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gov, keys := twoOfThree(t, dir)
	data := filepath.Join(dir, "data")
	args := []string{"--data", data, "--governance", gov, "--runs-per-second", "-1"}
	srv := startServe(t, 0, nil, args...)
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","scenario":{"nodes":1,"approvals":1,"risky_approvals":1},
		"approval_timeout_seconds":3,"approval_timeout_action":"approve"}`)
	s := a.mustStream(t, rc.SessionID, 0)
	var in *messages.InterruptRaisedPayload
	for in == nil {
		in, _ = s.mustEnv(t).Payload.(*messages.InterruptRaisedPayload)
	}
	if in.Approval == nil || in.TimeoutAction != messages.DecisionReject {
		t.Fatalf("interrupt_raised %+v: want a covered interrupt announcing timeout_action reject", in)
	}
	approve := func(key string) result {
		return runCLI(t, t.Context(), nil, false, "approve", in.InterruptID, "--key", key, "--server", "http://"+srv.base, "--yes")
	}
	if r := approve(keys["alice"]); r.code != exitOK || !strings.Contains(r.stdout, "1 of 2 signatures; waiting") {
		t.Fatalf("alice: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s.close()
	if err := srv.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.reap()

	srv = startServe(t, 0, nil, args...)
	a = newHardenAPI(t, srv, "")
	s = a.mustStream(t, rc.SessionID, 0)
	var events []*messages.Envelope
	for {
		env := s.mustEnv(t)
		events = append(events, env)
		if env.Type.Terminal() {
			break
		}
	}
	testkit.AssertInvariants(t, events)
	var expired []*messages.InterruptExpiredPayload
	for _, env := range events {
		switch p := env.Payload.(type) {
		case *messages.InterruptExpiredPayload:
			expired = append(expired, p)
		case *messages.ToolCallFinishedPayload:
			if p.Tool == "publish" && !p.IsError {
				t.Fatalf("the covered publish call ran with 1 of 2 signatures: %+v", p)
			}
		}
	}
	if len(expired) != 1 || expired[0].Action != messages.DecisionReject {
		t.Fatalf("interrupt_expired %+v, want one, rejected", expired)
	}
	if r := approve(keys["bob"]); r.code != exitFailed || !strings.Contains(r.stderr, "expired") {
		t.Fatalf("bob after the expiry: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	srv.terminate()
	if r := runCLI(t, t.Context(), nil, false, "audit", "verify", "--data", data, "--governance", gov); r.code != exitOK {
		t.Fatalf("audit verify --governance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestApprove_Choice: `conclave approve` answers a choice question without
// a key: it shows the options numbered and reads the answer (a number)
// from stdin, or takes --choose (a label); an answer naming no option
// sends nothing; a plain approval without --key is still a usage error.
func TestApprove_Choice(t *testing.T) {
	t.Parallel()
	srv := startServe(t, 0, nil, "--runs-per-second", "-1")
	a := newHardenAPI(t, srv, "")
	rc := a.mustStartRun(t, `{"question":"q","concurrency":1,"scenario":{"nodes":2,"waves":1,"tokens":2,"choices":2,"multiple_choice":true}}`)
	s := a.mustStream(t, rc.SessionID, 0)
	var events []*messages.Envelope
	nextChoice := func() string {
		t.Helper()
		for {
			env := s.mustEnv(t)
			events = append(events, env)
			if p, ok := env.Payload.(*messages.InterruptRaisedPayload); ok && p.Kind == messages.InterruptChoice {
				return p.InterruptID
			}
		}
	}
	cli := func(stdin string, args ...string) result {
		return runCLIWith(t, t.Context(), cliIO{stdin: strings.NewReader(stdin)}, append([]string{"approve", "--server", "http://" + srv.base}, args...)...)
	}
	id := nextChoice()
	if r := cli("purple\n", id); r.code != exitFailed || !strings.Contains(r.stderr, `"purple" names no option`) {
		t.Fatalf("purple: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := cli("3, 1\n", id)
	if r.code != exitOK || !strings.Contains(r.stdout, "chose Skip this aspect, Broad survey for "+id) ||
		!strings.Contains(r.stderr, "  1. Broad survey [broad]: Cover every source briefly\n") || !strings.Contains(r.stderr, "choose one or more of 1-3 (e.g. 1,3), or [r]eject? ") {
		t.Fatalf("numbered: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	id = nextChoice()
	if r := cli("", id, "--choose", "deep dive"); r.code != exitOK || !strings.Contains(r.stdout, "chose Deep dive for "+id) {
		t.Fatalf("--choose: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for {
		env := s.mustEnv(t)
		events = append(events, env)
		if env.Type.Terminal() {
			break
		}
	}
	var resolved []string
	for _, env := range events {
		if p, ok := env.Payload.(*messages.InterruptResolvedPayload); ok {
			resolved = append(resolved, strings.Join(p.Choices, "+"))
		}
	}
	if strings.Join(resolved, ",") != "skip+broad,deep" {
		t.Fatalf("interrupt_resolved choices %v", resolved)
	}
	rc = a.mustStartRun(t, `{"question":"q","hitl":"plan","scenario":{"nodes":1}}`)
	s = a.mustStream(t, rc.SessionID, 0)
	var plan string
	for plan == "" {
		if p, ok := s.mustEnv(t).Payload.(*messages.InterruptRaisedPayload); ok {
			plan = p.InterruptID
		}
	}
	if r := cli("", plan); r.code != exitUsage || !strings.Contains(r.stderr, "--key is required") {
		t.Fatalf("plan without a key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli("", plan, "--choose", "1"); r.code != exitUsage || !strings.Contains(r.stderr, "is not one") {
		t.Fatalf("--choose on a plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
