package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	oa "github.com/openai/openai-go/v3"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
)

// How a model.Request becomes chat messages:
//
//	system     the role's prompt (SystemPrompt): what the role does and the
//	           exact shape of its final answer
//	user       the task: the agent, the question, the goal and the inputs,
//	           each in its own tag (<agent>, <question>, <task>, <input>, …)
//	…          History: per earlier turn, an assistant message with its text
//	           and tool_calls, then one tool message per result
//	user       the turn: <turn>, <attempt>, the advisor's guidance, context
//	           injected by a supervisor, the async tasks' state
//
// The director and the steerer are not given tools to call: the tools their
// plan may give its nodes are listed in the task (<available_tools>).
//
// The system prompt, the task and the history are a stable prefix from one
// turn to the next (what servers' prompt caches reuse); only the last
// message changes. Tool results that are errors start with ErrorPrefix.

// ErrorPrefix starts the content of a tool message whose result is an error.
const ErrorPrefix = "ERROR: "

// systemPrompts are the roles' system prompts. Each starts with the role's
// name ("You are the director …"), which is how the openaitest server
// tells roles apart.
var systemPrompts = map[model.Role]string{
	model.RoleDirector: `You are the director of a council of AI agents. Split the question into a plan of nodes, each a goal for one worker agent; a node may depend on others (deps), whose outputs it then receives. Nodes without dependencies run first, in parallel.
Answer with the plan as one JSON object and nothing else: {"nodes": [{"id": "n001", "goal": "…", "deps": ["…"], "tools": ["search"]}]}. Ids are short and unique; deps name ids of the plan; the graph has no cycle; "tools" lists only tools of <available_tools>. A node may be a team ("kind": "team", with a nested plan in "team") or a debate ("kind": "debate", with "debate": {"agents": [{"id": "a1", "persona": "…"}], "rounds": 2}).`,
	model.RoleWorker:      `You are the worker of one node of a council of AI agents: do the task you are given, using the inputs from other agents and the tools you have when they help. Your final text is your node's output, read by the agents after you: make it self-contained and concise.`,
	model.RoleSubagent:    `You are the subagent a worker of a council of AI agents delegated a task to. Do the task, using your tools when they help; your final text is returned to the worker as the tool result.`,
	model.RoleSynthesizer: `You are the synthesizer of a council of AI agents: write one answer to the question from the inputs the other agents produced. Keep what they agree on, say where they disagree, and cite no input you did not receive.`,
	model.RoleDebater:     `You are the debater of one side of a debate among AI agents. Argue your persona's position for this round, answering the earlier lines of the transcript. End your text with exactly one line: "STANCE: held", "STANCE: shifted" or "STANCE: conceded".`,
	model.RoleJudge:       `You are the judge of a debate among AI agents. Assess the round: where the debaters agree, and what is still open. End your text with exactly one line: "CONSENSUS_REACHED: true" or "CONSENSUS_REACHED: false".`,
	model.RoleAdvisor:     `You are the advisor checking an AI agent's final answer against its task. Reply with exactly one of: "<signal>CONTINUE</signal>" when the answer is fine; "<signal>REDIRECT</signal> " followed by what the agent must do better; "<signal>HALT</signal> " followed by the reason the answer must be stopped.`,
	model.RoleSteerer:     `You are the steerer of a council of AI agents: turn a human's steering note into a change of the running plan. Answer with the change as one JSON object and nothing else: {"ops": [{"op": "add_node", "node": {"id": "…", "goal": "…", "deps": ["…"]}}]}. Operations: add_node (node), remove_node (node_id), split_node (node_id, into), reroute_edge (from, to, new_from), set_role (node_id, role), set_tools (node_id, tools: only tools of <available_tools>), wrap_in_team (node_ids, team_id, goal).`,
}

// consultPrompt is the advisor's system prompt for a worker's consult
// (Request.Consult) rather than a check of its final answer.
const consultPrompt = `You are the advisor of an AI agent working on one task of a council; it asks you for advice mid-task. Answer its <consult> question with short, concrete advice it can act on now, given its task and <review>, its work so far.`

// SystemPrompt returns the system prompt of role ("" for an unknown role).
func SystemPrompt(role model.Role) string { return systemPrompts[role] }

// prompt is a request rendered as chat messages, before the budget.
type prompt struct {
	system string
	task   taskParts
	turns  []model.Exchange
	last   string
	// dropped counts what the budget left out.
	droppedInputs, droppedTurns, droppedLines int
	// names are the wire names of the request's tools and calls.
	names *wireNames
}

// taskParts is the task message, kept in parts so that the budget can drop
// its oldest inputs and transcript lines.
type taskParts struct {
	head       string   // agent, question, goal, plan, note, review, text files
	inputs     []string // req.Context
	transcript []string // req.Transcript
	// media are the run's images and PDFs the server accepts: content
	// parts after the task's text (the message is then an array of parts).
	media []messages.RunFile
}

func newPrompt(req model.Request, in Inputs) *prompt {
	p := &prompt{system: SystemPrompt(req.Role), names: wireNamesOf(req)}
	if req.Role == model.RoleAdvisor && req.Consult != "" {
		p.system = consultPrompt
	}
	var b strings.Builder
	tag(&b, "agent", req.AgentID)
	if req.Persona != "" {
		tag(&b, "persona", req.Persona)
	}
	if req.Round > 0 {
		tag(&b, "round", strconv.Itoa(req.Round))
	}
	if req.Depth > 0 {
		tag(&b, "depth", strconv.Itoa(req.Depth))
	}
	if req.Question != "" {
		tag(&b, "question", req.Question)
	}
	if req.Goal != "" {
		tag(&b, "task", req.Goal)
	}
	if req.Plan != nil {
		js, err := json.Marshal(req.Plan)
		if err == nil { // a plan is strings and lists: it always encodes
			tag(&b, "plan", string(js))
		}
	}
	if req.Note != "" {
		tag(&b, "note", req.Note)
	}
	if req.Review != "" {
		tag(&b, "review", req.Review)
	}
	if req.Consult != "" {
		tag(&b, "consult", req.Consult)
	}
	if plansTools(req.Role) && len(req.Tools) > 0 { // the tools a node may be given ("tools" of a plan node)
		var tb strings.Builder
		for i, t := range req.Tools {
			if i > 0 {
				tb.WriteByte('\n')
			}
			tb.WriteString(t.Name)
			if t.Description != "" {
				tb.WriteString(": " + t.Description)
			}
		}
		tag(&b, "available_tools", tb.String())
	}
	if req.Role == model.RoleDirector && len(req.Agents) > 0 { // the remote agents a node may name ("agent")
		var ab strings.Builder
		for i, a := range req.Agents {
			if i > 0 {
				ab.WriteByte('\n')
			}
			ab.WriteString(a.Name)
			if a.Description != "" {
				ab.WriteString(": " + a.Description)
			}
		}
		tag(&b, "available_agents", ab.String()+"\nA node whose goal one of these remote agents does best may name it (\"agent\": \"<name>\"): the node is then that agent's task.")
	}
	p.task.media = writeFiles(&b, req.Files, in)
	p.task.head, p.task.inputs, p.task.transcript = b.String(), req.Context, req.Transcript
	p.turns = req.History

	b.Reset()
	tag(&b, "turn", strconv.Itoa(req.Turn))
	tag(&b, "attempt", strconv.Itoa(max(req.Attempt, 1)))
	if req.Guidance != "" {
		tag(&b, "guidance", req.Guidance)
	}
	for _, s := range req.Injected {
		tag(&b, "update", s)
	}
	for _, t := range req.AsyncTasks {
		b.WriteString(`<async_task id="` + attr(t.ID) + `" status="` + attr(t.Status) + `">` + "\n")
		b.WriteString(t.Task)
		if t.Output != "" {
			b.WriteString("\n<output>\n" + t.Output + "\n</output>")
		}
		b.WriteString("\n</async_task>\n")
	}
	if len(req.History) == 0 { // results without their calls (a restarted agent): say them in text
		for _, r := range req.ToolResults {
			b.WriteString(`<tool_result name="` + attr(r.Name) + `">` + "\n" + resultContent(r) + "\n</tool_result>\n")
		}
	}
	p.last = b.String()
	return p
}

// taskText renders the task message, with a note of what the budget left
// out.
func (p *prompt) taskText() string {
	var b strings.Builder
	b.WriteString(p.task.head)
	if p.droppedInputs > 0 {
		tag(&b, "omitted", strconv.Itoa(p.droppedInputs)+" earlier inputs were left out to fit the context budget")
	}
	for _, in := range p.task.inputs[p.droppedInputs:] {
		tag(&b, "input", in)
	}
	if p.droppedLines > 0 {
		tag(&b, "omitted", strconv.Itoa(p.droppedLines)+" earlier transcript lines were left out to fit the context budget")
	}
	for _, l := range p.task.transcript[p.droppedLines:] {
		tag(&b, "line", l)
	}
	if p.droppedTurns > 0 {
		tag(&b, "omitted", strconv.Itoa(p.droppedTurns)+" of your earlier turns were left out to fit the context budget")
	}
	return b.String()
}

// messages renders p as the request's messages.
func (p *prompt) messages() []oa.ChatCompletionMessageParamUnion {
	turns := p.turns[p.droppedTurns:]
	msgs := make([]oa.ChatCompletionMessageParamUnion, 0, 3+2*len(turns))
	msgs = append(msgs, oa.SystemMessage(p.system), p.taskMessage())
	for _, ex := range turns {
		msgs = append(msgs, exchangeMessages(ex, p.names)...)
	}
	return append(msgs, oa.UserMessage(p.last))
}

// Inputs says which of a run's attached files (model.Request.Files) the
// server's models take as content parts. Text files are always put in the
// task's text; an image or PDF the server does not take is named there,
// with a note that it was left out. The zero value takes none: many
// OpenAI-compatible servers (text-only models) refuse content parts.
type Inputs struct {
	// Images: PNG, JPEG, GIF and WebP images as image_url parts (a
	// base64 data URL), for models with vision.
	Images bool
	// PDF: PDFs as file parts (file_data, a base64 data URL, and the
	// filename); the Chat Completions API takes PDFs only as file parts.
	PDF bool
}

// takes reports whether in takes f as a content part.
func (in Inputs) takes(f messages.RunFile) bool {
	switch f.Kind() {
	case messages.FileImage:
		return in.Images
	case messages.FilePDF:
		return in.PDF
	}
	return false
}

// writeFiles writes the run's files into the task: text files whole, in
// a <file> tag; the images and PDFs the server takes as a <file> tag that
// says which attached part it is; the others as a <file> tag saying they
// were left out. It returns the files to attach as parts, in order.
func writeFiles(b *strings.Builder, files []messages.RunFile, in Inputs) []messages.RunFile {
	var media []messages.RunFile
	for _, f := range files {
		open := `<file name="` + attr(f.Name) + `" media_type="` + attr(f.MediaType) + `" size="` + strconv.FormatInt(f.Size, 10) + `"`
		switch {
		case f.Kind() == messages.FileText:
			b.WriteString(open + ">\n" + string(f.Data) + "\n</file>\n")
		case in.takes(f):
			media = append(media, f)
			b.WriteString(open + ` part="` + strconv.Itoa(len(media)) + `"/>` + "\n")
		default:
			b.WriteString(open + ` omitted="this model does not take ` + attr(f.MediaType) + ` input"/>` + "\n")
		}
	}
	return media
}

// taskMessage is the task as a user message: text, or, with media, the
// text part then one part per file.
func (p *prompt) taskMessage() oa.ChatCompletionMessageParamUnion {
	if len(p.task.media) == 0 {
		return oa.UserMessage(p.taskText())
	}
	parts := make([]oa.ChatCompletionContentPartUnionParam, 0, 1+len(p.task.media))
	parts = append(parts, oa.TextContentPart(p.taskText()))
	for _, f := range p.task.media {
		if f.Kind() == messages.FileImage {
			parts = append(parts, oa.ImageContentPart(oa.ChatCompletionContentPartImageImageURLParam{URL: f.DataURL()}))
			continue
		}
		parts = append(parts, oa.FileContentPart(oa.ChatCompletionContentPartFileFileParam{
			FileData: oa.String(f.DataURL()), Filename: oa.String(f.Name)}))
	}
	return oa.UserMessage(parts)
}

// Token estimates of the media parts (the budget's): an image at most
// what a high-detail 1024x1024 one costs on OpenAI's tile scheme
// (85 + 4 tiles of 170); a PDF one token per four bytes of it, which
// over-counts (its text and page images cost less than its bytes).
const imageTokens = 765

func mediaTokens(files []messages.RunFile) int {
	n := 0
	for _, f := range files {
		if f.Kind() == messages.FileImage {
			n += imageTokens
		} else {
			n += int(f.Size+3) / 4
		}
	}
	return n
}

// exchangeMessages is one earlier turn: the assistant message (text and
// tool calls), then one tool message per result.
func exchangeMessages(ex model.Exchange, names *wireNames) []oa.ChatCompletionMessageParamUnion {
	var a oa.ChatCompletionAssistantMessageParam
	if ex.Text != "" || len(ex.Calls) == 0 {
		a.Content.OfString = oa.String(ex.Text)
	}
	for _, c := range ex.Calls {
		args := string(c.Args)
		if args == "" {
			args = "{}"
		}
		call := &oa.ChatCompletionMessageFunctionToolCallParam{
			ID:       c.ID,
			Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: names.wire(c.Name), Arguments: args},
		}
		if len(c.Meta) > 0 { // what the server sent with the call goes back with it (Gemini's thought_signature)
			call.SetExtraFields(map[string]any{"extra_content": c.Meta})
		}
		a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{OfFunction: call})
	}
	msgs := []oa.ChatCompletionMessageParamUnion{{OfAssistant: &a}}
	answered := make(map[string]bool, len(ex.Results))
	for _, r := range ex.Results {
		answered[r.CallID] = true
		msgs = append(msgs, oa.ToolMessage(resultContent(r), r.CallID))
	}
	// Every tool call needs its tool message, or servers refuse the request.
	for _, c := range ex.Calls {
		if !answered[c.ID] {
			msgs = append(msgs, oa.ToolMessage(ErrorPrefix+"no result", c.ID))
		}
	}
	return msgs
}

func resultContent(r model.ToolResult) string {
	if r.IsError {
		return ErrorPrefix + r.Content
	}
	return r.Content
}

// tag writes <name>\ncontent\n</name>\n.
func tag(b *strings.Builder, name, content string) {
	b.WriteString("<" + name + ">\n")
	b.WriteString(content)
	b.WriteString("\n</" + name + ">\n")
}

// attr makes s safe inside a double-quoted attribute.
func attr(s string) string { return strings.ReplaceAll(s, `"`, "'") }

// EstimateTokens is the token estimate of the context budget: one token
// per four bytes, rounded up. It is coarse (real tokenizers give 3 to 5
// bytes a token for English, fewer for code and other scripts) but needs no
// tokenizer per model; leave the budget some headroom.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// messageOverhead is the estimated tokens every message costs beyond its
// content (role and separators).
const messageOverhead = 4

func (p *prompt) estimate(tools int) int {
	n := tools + 3*messageOverhead + EstimateTokens(p.system) + EstimateTokens(p.taskText()) + mediaTokens(p.task.media) + EstimateTokens(p.last)
	for _, ex := range p.turns[p.droppedTurns:] {
		n += exchangeTokens(ex)
	}
	return n
}

func exchangeTokens(ex model.Exchange) int {
	n := messageOverhead + EstimateTokens(ex.Text)
	for _, c := range ex.Calls {
		n += EstimateTokens(c.ID) + EstimateTokens(c.Name) + EstimateTokens(string(c.Args))
	}
	for _, r := range ex.Results {
		n += messageOverhead + EstimateTokens(r.Content)
	}
	return n
}

// fit drops the oldest inputs, then the oldest transcript lines, then the
// oldest earlier turns (a turn goes whole: its calls and their results),
// until the estimate is within budget. The system prompt, the task's head,
// the latest earlier turn and the last message always stay, so a prompt
// may still be over budget after fit; it reports whether it fits. The
// estimate is updated as items go (linear in the request's size).
func (p *prompt) fit(budget, tools int) bool {
	if budget <= 0 {
		return true
	}
	const tagTokens = 4   // <input>\n … \n</input>\n
	const noteTokens = 64 // the <omitted> notes the dropping adds
	n := p.estimate(tools)
	if n <= budget {
		return true
	}
	n += noteTokens
	for n > budget {
		switch {
		case p.droppedInputs < len(p.task.inputs):
			n -= EstimateTokens(p.task.inputs[p.droppedInputs]) + tagTokens
			p.droppedInputs++
		case p.droppedLines < len(p.task.transcript):
			n -= EstimateTokens(p.task.transcript[p.droppedLines]) + tagTokens
			p.droppedLines++
		case p.droppedTurns < len(p.turns)-1:
			n -= exchangeTokens(p.turns[p.droppedTurns])
			p.droppedTurns++
		default:
			return false
		}
	}
	return true
}
