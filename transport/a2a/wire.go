package a2a

import (
	"encoding/json"
	"strings"
)

// The structs in this file are A2A v1.0's wire format (ProtoJSON of
// specification/a2a.proto: camelCase fields, enum values by name, default
// values omitted), not Conclave's. They live here, and not in package
// messages, because messages is the one home of *our* wire types and
// commands: A2A is one projection of our events among several, and its
// types must not leak into the engine or the other transports. Only the
// fields Conclave reads or writes are declared; request decoding refuses
// fields that are not declared (see decodeParams), so a client that sends
// something we would silently ignore learns so.

// ProtocolVersion is the A2A version this package speaks.
const ProtocolVersion = "1.0"

// TaskState is a task's lifecycle state, encoded by its enum name.
type TaskState string

// Task states (spec §4.1.3).
const (
	StateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	StateWorking       TaskState = "TASK_STATE_WORKING"
	StateCompleted     TaskState = "TASK_STATE_COMPLETED"
	StateFailed        TaskState = "TASK_STATE_FAILED"
	StateCanceled      TaskState = "TASK_STATE_CANCELED"
	StateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	StateRejected      TaskState = "TASK_STATE_REJECTED"
	StateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// Terminal reports whether a task in state s can no longer change.
func (s TaskState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled || s == StateRejected
}

// Interrupted reports whether a task in state s waits for its client.
func (s TaskState) Interrupted() bool { return s == StateInputRequired || s == StateAuthRequired }

// ParseTaskState validates an enum name as a ListTasks filter. The empty
// string and TASK_STATE_UNSPECIFIED mean "any".
func ParseTaskState(s string) (TaskState, bool) {
	switch st := TaskState(s); st {
	case "", "TASK_STATE_UNSPECIFIED":
		return "", true
	case StateSubmitted, StateWorking, StateCompleted, StateFailed, StateCanceled, StateInputRequired, StateRejected, StateAuthRequired:
		return st, true
	}
	return "", false
}

// Role says who wrote a message.
type Role string

// Roles.
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// Part is one piece of a message or artifact: exactly one of Text, Raw,
// URL and Data is set. Pointers keep an empty text ("") distinct from an
// absent one.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"` // base64
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Text: &s} }

// DataPart returns a data part holding v, which must marshal (it is one of
// this package's own structs).
func DataPart(v any) Part {
	b, err := json.Marshal(v)
	if err != nil {
		panic("a2a: data part does not marshal: " + err.Error())
	}
	return Part{Data: b}
}

// kinds counts how many of the oneof members are set.
func (p *Part) kinds() int {
	n := 0
	for _, set := range []bool{p.Text != nil, p.Raw != nil, p.URL != nil, p.Data != nil} {
		if set {
			n++
		}
	}
	return n
}

// Message is one turn of communication.
type Message struct {
	MessageID        string          `json:"messageId"`
	ContextID        string          `json:"contextId,omitempty"`
	TaskID           string          `json:"taskId,omitempty"`
	Role             Role            `json:"role"`
	Parts            []Part          `json:"parts"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
}

// TaskStatus is a task's state, with the agent message that explains it.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string          `json:"artifactId"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Parts       []Part          `json:"parts"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// Task is one unit of work: one Conclave run.
type Task struct {
	ID        string          `json:"id"`
	ContextID string          `json:"contextId"`
	Status    TaskStatus      `json:"status"`
	Artifacts []Artifact      `json:"artifacts,omitempty"`
	History   []Message       `json:"history,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent is a stream frame reporting a status change.
type TaskStatusUpdateEvent struct {
	TaskID    string          `json:"taskId"`
	ContextID string          `json:"contextId"`
	Status    TaskStatus      `json:"status"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent is a stream frame carrying (a chunk of) an
// artifact. Append false creates or replaces the artifact with that id;
// true appends the parts to it.
type TaskArtifactUpdateEvent struct {
	TaskID    string          `json:"taskId"`
	ContextID string          `json:"contextId"`
	Artifact  Artifact        `json:"artifact"`
	Append    bool            `json:"append,omitempty"`
	LastChunk bool            `json:"lastChunk,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// StreamResponse is one frame of a stream: exactly one member is set.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// SendMessageResponse answers SendMessage: a Task (Conclave never answers
// with a bare Message).
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// SendMessageConfiguration tunes SendMessage and SendStreamingMessage.
type SendMessageConfiguration struct {
	AcceptedOutputModes        []string        `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int32          `json:"historyLength,omitempty"`
	ReturnImmediately          bool            `json:"returnImmediately,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      json.RawMessage           `json:"metadata,omitempty"`
}

// GetTaskRequest is the params of GetTask.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int32 `json:"historyLength,omitempty"`
}

// ListTasksRequest is the params of ListTasks.
type ListTasksRequest struct {
	Tenant               string `json:"tenant,omitempty"`
	ContextID            string `json:"contextId,omitempty"`
	Status               string `json:"status,omitempty"`
	PageSize             *int32 `json:"pageSize,omitempty"`
	PageToken            string `json:"pageToken,omitempty"`
	HistoryLength        *int32 `json:"historyLength,omitempty"`
	StatusTimestampAfter string `json:"statusTimestampAfter,omitempty"`
	IncludeArtifacts     bool   `json:"includeArtifacts,omitempty"`
}

// ListTasksResponse answers ListTasks. Every field is required on the wire.
type ListTasksResponse struct {
	Tasks         []Task `json:"tasks"`
	NextPageToken string `json:"nextPageToken"`
	PageSize      int32  `json:"pageSize"`
	TotalSize     int32  `json:"totalSize"`
}

// CancelTaskRequest is the params of CancelTask.
type CancelTaskRequest struct {
	Tenant   string          `json:"tenant,omitempty"`
	ID       string          `json:"id"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// SubscribeToTaskRequest is the params of SubscribeToTask.
type SubscribeToTaskRequest struct {
	Tenant string `json:"tenant,omitempty"`
	ID     string `json:"id"`
}

// AgentCard describes this agent (spec §4.4.1), served at CardPath.
type AgentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Provider             *AgentProvider            `json:"provider,omitempty"`
	Version              string                    `json:"version"`
	DocumentationURL     string                    `json:"documentationUrl,omitempty"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
}

// AgentInterface is one endpoint of the agent.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// AgentProvider names who runs the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// AgentCapabilities lists optional features.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
	ExtendedAgentCard bool `json:"extendedAgentCard"`
}

// SecurityScheme is a oneof; Conclave only uses HTTP bearer auth.
type SecurityScheme struct {
	HTTPAuth *HTTPAuthSecurityScheme `json:"httpAuthSecurityScheme,omitempty"`
}

// HTTPAuthSecurityScheme is RFC 7235 HTTP authentication.
type HTTPAuthSecurityScheme struct {
	Description string `json:"description,omitempty"`
	Scheme      string `json:"scheme"`
}

// SecurityRequirement names schemes that must all be satisfied.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is the proto wrapper of a list of strings (scopes).
type StringList struct {
	List []string `json:"list"`
}

// AgentSkill is one thing the agent can do.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// JSON-RPC 2.0 envelopes.

// rpcRequest is a JSON-RPC request. ID stays raw so it is echoed exactly
// (string, number or null).
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// rpcResponse is a JSON-RPC response: Result or Error.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// validID reports whether a JSON-RPC id is a string, a number or null
// (absent counts as null).
func validID(id json.RawMessage) bool {
	s := strings.TrimSpace(string(id))
	if s == "" || s == "null" {
		return true
	}
	switch s[0] {
	case '"':
		var v string
		return json.Unmarshal(id, &v) == nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var v json.Number
		return json.Unmarshal(id, &v) == nil
	}
	return false
}
