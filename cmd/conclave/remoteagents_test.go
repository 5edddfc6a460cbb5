package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/transport/a2a"
	"github.com/conclave-ai/conclave/transport/a2a/a2aclient"
)

func TestRemoteAgentFlags_Parse(t *testing.T) {
	t.Parallel()
	f := remoteAgentFlags{specs: []string{"helper=http://127.0.0.1:8081/.well-known/agent-card.json,auth_env=HELPER_AUTH", "b=https://x.example/card"}}
	specs, err := f.parse()
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0] != (remoteAgentSpec{name: "helper", cardURL: "http://127.0.0.1:8081/.well-known/agent-card.json", authEnv: "HELPER_AUTH"}) {
		t.Fatalf("%+v", specs)
	}
	if got := f.secretValues(func(k string) string { return map[string]string{"HELPER_AUTH": "Bearer xyz-secret"}[k] }); len(got) != 1 || got[0] != "Bearer xyz-secret" {
		t.Fatalf("secrets %q", got)
	}
	for _, bad := range []string{"helper", "=http://x/", "h=ftp://x/", "h=http://x/,token=abc", "h h=http://x/"} {
		if _, err := (&remoteAgentFlags{specs: []string{bad}}).parse(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := (&remoteAgentFlags{specs: []string{"h=http://x/", "h=http://y/"}}).parse(); err == nil {
		t.Error("a name given twice was accepted")
	}
}

// TestServe_RemoteAgentKillNine: `conclave serve` A has a council node run
// by `conclave serve` B (--a2a-agent). A is killed with SIGKILL while the
// remote task works; restarted on the same data directory, it follows the
// same remote task again (its id was journaled before the task's stream
// was followed) and the run finishes with B's answer as the node's output.
func TestServe_RemoteAgentKillNine(t *testing.T) {
	t.Parallel()
	t.Run("working", func(t *testing.T) { t.Parallel(); killNineRemote(t, false) })
	// A stays down until B's task has finished: the restarted A cannot
	// subscribe to a terminal task and reads its end with GetTask.
	t.Run("finished", func(t *testing.T) { t.Parallel(); killNineRemote(t, true) })
}

func killNineRemote(t *testing.T, waitForRemote bool) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	serve := func(args ...string) *crashChild {
		cmd := exec.Command(exe, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "info"}, args...)...)
		cmd.Env = append(os.Environ(), crashChildEnv+"=1")
		c := startChild(t, cmd, "")
		c.base = "http://" + c.base
		return c
	}
	b := serve("--memory")
	defer b.terminate()
	dir := t.TempDir()
	aArgs := []string{"--data", dir, "--a2a-agent", "helper=" + b.base + a2a.CardPath}
	a := serve(aArgs...)
	ctx, cancel := context.WithTimeout(t.Context(), crashFinishWait)
	defer cancel()
	client := &http.Client{}

	start := messages.StartRun{Question: "remote council", Scenario: &messages.Scenario{Nodes: 1, Tokens: 2, SynthesisTokens: 2,
		Remote: &messages.RemoteScenario{Agent: "helper", Nodes: messages.NodeSelector{IDs: []string{"n001"}}}}}
	body, _ := json.Marshal(start)
	resp, err := client.Post(a.base+"/api/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rc messages.RunCreated
	err = json.NewDecoder(resp.Body).Decode(&rc)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/v1/runs = %d %v", resp.StatusCode, err)
	}
	node := messages.NodeStream("n001")
	var taskID string
	err = readSessionSSE(ctx, client, a.base, rc.SessionID, 0, func(f crashFrame) bool {
		if p, ok := f.env.Payload.(*messages.RemoteTaskPayload); ok && taskID == "" {
			taskID = p.TaskID
		}
		return !(taskID != "" && f.env.Lane.StreamID == node && f.env.Type == messages.TextDelta)
	})
	if err != nil || taskID == "" {
		t.Fatalf("follow A before the kill: %v (task %q)\n%s", err, taskID, a.log.tail(4<<10))
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.reap()
	bc, err := a2aclient.Dial(ctx, b.base+a2a.CardPath, a2aclient.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if waitForRemote {
		for {
			task, err := bc.GetTask(ctx, taskID)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status.State.Terminal() {
				break
			}
			select { // polling the remote, with the test's deadline
			case <-ctx.Done():
				t.Fatalf("the remote task is still %s", task.Status.State)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	a = serve(aArgs...)
	defer a.terminate()
	var events []*messages.Envelope
	err = readSessionSSE(ctx, client, a.base, rc.SessionID, 0, func(f crashFrame) bool {
		events = append(events, f.env)
		return !(f.env.RunID == rc.RunID && f.env.Type.Terminal())
	})
	if err != nil {
		t.Fatalf("follow A after the restart: %v\n%s", err, a.log.tail(4<<10))
	}
	if last := events[len(events)-1]; last.Type != messages.RunFinished {
		t.Fatalf("the run ended with %s %s\n%s", last.Type, mustJSON(t, last.Payload), a.log.tail(4<<10))
	}
	var restarted bool
	var output string
	var lane []string
	for _, ev := range events {
		if ev.Lane.StreamID != node {
			continue
		}
		lane = append(lane, string(ev.Type))
		switch p := ev.Payload.(type) {
		case *messages.AgentRestartedPayload:
			restarted = true
		case *messages.RemoteTaskPayload:
			if p.TaskID != taskID {
				t.Fatalf("a second remote task %s (the first was %s)", p.TaskID, taskID)
			}
		case *messages.NodeCompletedPayload:
			output = p.Output
		}
	}
	t.Logf("lane %s: %s", node, strings.Join(lane, " "))
	task, err := bc.GetTask(ctx, taskID)
	if err != nil {
		t.Fatal(err)
	}
	var answer string
	if task.Status.Message != nil && len(task.Status.Message.Parts) > 0 && task.Status.Message.Parts[0].Text != nil {
		answer = *task.Status.Message.Parts[0].Text
	}
	if !restarted || task.Status.State != a2a.StateCompleted || output != answer || answer == "" {
		t.Fatalf("restarted %v, remote task %s, node output %q, remote answer %q", restarted, task.Status.State, output, answer)
	}
}

// TestReadme_RemoteAgents runs the README's "Remote agents" example: the
// two servers (on free ports: the second's --a2a-agent names the first's
// real address) and the curl that starts the council; the run must finish
// with node n002 completed as the remote's task.
func TestReadme_RemoteAgents(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Remote agents\n")
	if !ok {
		t.Fatal("the README has no Remote agents section")
	}
	_, block, _ := strings.Cut(sec, "```console\n")
	block, _, _ = strings.Cut(block, "```")
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 3 {
		t.Fatalf("the example has %d commands, want 3 (two servers, one curl):\n%s", len(lines), block)
	}
	const prefix = "go run ./cmd/conclave serve "
	serveArgs := func(line string) []string {
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("not a serve command: %s", line)
		}
		var args []string
		fields := strings.Fields(strings.TrimPrefix(line, prefix))
		for i := 0; i < len(fields); i++ {
			if fields[i] == "--addr" { // startServe listens on a free port
				i++
				continue
			}
			args = append(args, fields[i])
		}
		return args
	}
	remoteSrv := startServe(t, 0, nil, serveArgs(lines[0])...)
	second := strings.ReplaceAll(lines[1], "127.0.0.1:8081", remoteSrv.base)
	srv := startServe(t, 0, nil, serveArgs(second)...)
	out, err := exec.Command("sh", "-c", strings.ReplaceAll(lines[2], "localhost:8080", srv.base)).Output()
	if err != nil {
		t.Fatalf("%s: %v", lines[2], err)
	}
	var rc messages.RunCreated
	if err := json.Unmarshal(out, &rc); err != nil || rc.RunID == "" {
		t.Fatalf("the curl answered %s (%v)", out, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), crashFinishWait)
	defer cancel()
	var remoteTask, completed bool
	var last *messages.Envelope
	err = readSessionSSE(ctx, &http.Client{}, "http://"+srv.base, rc.SessionID, 0, func(f crashFrame) bool {
		last = f.env
		if f.env.Lane.StreamID == messages.NodeStream("n002") {
			remoteTask = remoteTask || f.env.Type == messages.RemoteTask
			completed = completed || f.env.Type == messages.NodeCompleted
		}
		return !(f.env.RunID == rc.RunID && f.env.Type.Terminal())
	})
	if err != nil || last.Type != messages.RunFinished || !remoteTask || !completed {
		t.Fatalf("the run: %v, last %s, remote_task %v, n002 completed %v", err, last.Type, remoteTask, completed)
	}
}

// TestServe_RemoteAgentUnavailable: an agent nobody answers for at start
// is a warning, the server starts, and a node that names it fails with the
// reason (the run ends run_error, no crash); the Authorization value never
// appears in the log.
func TestServe_RemoteAgentUnavailable(t *testing.T) {
	t.Parallel()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	srv := startServe(t, 0, []string{"HELPER_AUTH=Bearer very-secret-token-123"},
		"--a2a-agent", "helper="+gone.URL+a2a.CardPath+",auth_env=HELPER_AUTH")
	log := srv.log.tail(64 << 10)
	if !strings.Contains(log, "remote A2A agent unavailable at start: its card is fetched again when a node names it") || !strings.Contains(log, "agent=helper") {
		t.Fatalf("no startup warning:\n%s", log)
	}
	start := messages.StartRun{Question: "q", Scenario: &messages.Scenario{Nodes: 1,
		Remote: &messages.RemoteScenario{Agent: "helper", Nodes: messages.NodeSelector{IDs: []string{"n001"}}}}}
	body, _ := json.Marshal(start)
	resp, err := http.Post("http://"+srv.base+"/api/v1/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var rc messages.RunCreated
	err = json.NewDecoder(resp.Body).Decode(&rc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), crashWait)
	defer cancel()
	var failed string
	var last *messages.Envelope
	err = readSessionSSE(ctx, &http.Client{}, "http://"+srv.base, rc.SessionID, 0, func(f crashFrame) bool {
		last = f.env
		if p, ok := f.env.Payload.(*messages.NodeFailedPayload); ok {
			failed = p.Error
		}
		return !(f.env.RunID == rc.RunID && f.env.Type.Terminal())
	})
	if err != nil || last.Type != messages.RunError || !strings.Contains(failed, `remote: agent unavailable: "helper"`) {
		t.Fatalf("err %v, last %s, node_failed %q", err, last.Type, failed)
	}
	if strings.Contains(srv.log.tail(64<<10), "very-secret-token-123") {
		t.Fatal("the Authorization value is in the log")
	}
}
