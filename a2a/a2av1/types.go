// Package a2av1 is the JSON-RPC binding of A2A 1.0 (the Agent2Agent protocol), as much of it as
// Quiver speaks: the methods SendMessage, SendStreamingMessage, GetTask, CancelTask and
// SubscribeToTask, their messages, tasks and events, and the 1.0 agent card with its
// supportedInterfaces. Names of methods and fields are the 1.0 specification's (its ProtoJSON
// form: camelCase fields, enums as their names such as TASK_STATE_COMPLETED, a part's kind
// given by which of text, raw, url or data it has).
//
// The official Go SDK, github.com/a2aproject/a2a-go, has no 1.0 release that Quiver's
// module proxy serves (v0.3.3 is its newest), and Quiver speaks A2A 0.3 through it. This
// package is the stopgap for 1.0 beside it: it goes once a2a-go ships 1.0, for that SDK's own
// types, client and handler.
package a2av1

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The protocol versions, as the A2A-Version header and an interface's protocolVersion give them.
const (
	// Version is the version this package speaks.
	Version = "1.0"
	// LegacyVersion is the version a2a-go speaks, assumed when a request names none.
	LegacyVersion = "0.3"
	// VersionHeader is the HTTP header a client names its version in.
	VersionHeader = "A2A-Version"
	// BindingJSONRPC is the JSON-RPC protocol binding's name in an AgentInterface.
	BindingJSONRPC = "JSONRPC"
	// CardPath is where an agent's card is, under its base URL.
	CardPath = "/.well-known/agent-card.json"
)

// The JSON-RPC methods of A2A 1.0 that this package knows.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
	MethodSubscribeToTask      = "SubscribeToTask"
	MethodListTasks            = "ListTasks"
	MethodGetExtendedAgentCard = "GetExtendedAgentCard"
	MethodCreatePushConfig     = "CreateTaskPushNotificationConfig"
	MethodGetPushConfig        = "GetTaskPushNotificationConfig"
	MethodListPushConfigs      = "ListTaskPushNotificationConfigs"
	MethodDeletePushConfig     = "DeleteTaskPushNotificationConfig"
)

// IsMethod reports whether name is a method of A2A 1.0's JSON-RPC binding (0.3's are named
// differently: message/send, tasks/get and so on).
func IsMethod(name string) bool {
	switch name {
	case MethodSendMessage, MethodSendStreamingMessage, MethodGetTask, MethodCancelTask, MethodSubscribeToTask,
		MethodListTasks, MethodGetExtendedAgentCard, MethodCreatePushConfig, MethodGetPushConfig,
		MethodListPushConfigs, MethodDeletePushConfig:
		return true
	}
	return false
}

// Role is who sent a message.
type Role string

// The roles.
const (
	RoleUser  Role = "ROLE_USER"
	RoleAgent Role = "ROLE_AGENT"
)

// TaskState is where a task stands.
type TaskState string

// The states of a task.
const (
	TaskStateSubmitted     TaskState = "TASK_STATE_SUBMITTED"
	TaskStateWorking       TaskState = "TASK_STATE_WORKING"
	TaskStateCompleted     TaskState = "TASK_STATE_COMPLETED"
	TaskStateFailed        TaskState = "TASK_STATE_FAILED"
	TaskStateCanceled      TaskState = "TASK_STATE_CANCELED"
	TaskStateInputRequired TaskState = "TASK_STATE_INPUT_REQUIRED"
	TaskStateRejected      TaskState = "TASK_STATE_REJECTED"
	TaskStateAuthRequired  TaskState = "TASK_STATE_AUTH_REQUIRED"
)

// Terminal reports whether s ends the task (completed, failed, canceled, rejected).
func (s TaskState) Terminal() bool {
	switch s {
	case TaskStateCompleted, TaskStateFailed, TaskStateCanceled, TaskStateRejected:
		return true
	}
	return false
}

// Interrupted reports whether the task waits on its client (input or authentication required).
func (s TaskState) Interrupted() bool {
	return s == TaskStateInputRequired || s == TaskStateAuthRequired
}

// Legacy is s as A2A 0.3 names it ("input-required"), the unprefixed lower-case form.
func (s TaskState) Legacy() string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_")), "_", "-")
}

// Part is a piece of a message or an artifact: exactly one of Text, Raw, URL or Data.
type Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       []byte          `json:"raw,omitempty"`
	URL       string          `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart is a part of text.
func TextPart(s string) Part { return Part{Text: &s} }

// String is the part as text: its text, its data as JSON, or its file named.
func (p Part) String() string {
	switch {
	case p.Text != nil:
		return *p.Text
	case len(p.Data) > 0:
		return string(p.Data)
	case p.URL != "":
		return fmt.Sprintf("[a file at %s]", p.URL)
	case p.Raw != nil:
		return fmt.Sprintf("[a file of %d bytes%s]", len(p.Raw), strings.TrimSuffix(" "+p.Filename, " "))
	}
	return ""
}

// Message is one turn of a conversation.
type Message struct {
	MessageID        string         `json:"messageId"`
	ContextID        string         `json:"contextId,omitempty"`
	TaskID           string         `json:"taskId,omitempty"`
	Role             Role           `json:"role"`
	Parts            []Part         `json:"parts"`
	Metadata         map[string]any `json:"metadata,omitempty"`
	Extensions       []string       `json:"extensions,omitempty"`
	ReferenceTaskIDs []string       `json:"referenceTaskIds,omitempty"`
}

// Text joins the message's parts as text.
func (m *Message) Text() string {
	if m == nil {
		return ""
	}
	return JoinParts(m.Parts)
}

// JoinParts joins parts as text, one a line.
func JoinParts(parts []Part) string {
	out := make([]string, 0, len(parts))
	for _, p := range parts {
		out = append(out, p.String())
	}
	return strings.Join(out, "\n")
}

// TaskStatus is a task's state, with the message that says why where there is one.
type TaskStatus struct {
	State     TaskState `json:"state"`
	Message   *Message  `json:"message,omitempty"`
	Timestamp string    `json:"timestamp,omitempty"`
}

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID  string         `json:"artifactId"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
	Parts       []Part         `json:"parts"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	Extensions  []string       `json:"extensions,omitempty"`
}

// Task is a unit of work of the agent.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	History   []Message      `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskStatusUpdateEvent says a task's status changed.
type TaskStatusUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    TaskStatus     `json:"status"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// TaskArtifactUpdateEvent brings an artifact of a task, or a chunk of it.
type TaskArtifactUpdateEvent struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Artifact  Artifact       `json:"artifact"`
	Append    bool           `json:"append,omitempty"`
	LastChunk bool           `json:"lastChunk,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// SendMessageConfiguration is how a SendMessage is to be answered.
type SendMessageConfiguration struct {
	AcceptedOutputModes []string `json:"acceptedOutputModes,omitempty"`
	HistoryLength       *int     `json:"historyLength,omitempty"`
	// ReturnImmediately asks for the task as soon as it exists; by default the answer waits
	// until the task ends or is interrupted.
	ReturnImmediately bool `json:"returnImmediately,omitempty"`
}

// SendMessageRequest is the params of SendMessage and SendStreamingMessage.
type SendMessageRequest struct {
	Tenant        string                    `json:"tenant,omitempty"`
	Message       *Message                  `json:"message"`
	Configuration *SendMessageConfiguration `json:"configuration,omitempty"`
	Metadata      map[string]any            `json:"metadata,omitempty"`
}

// SendMessageResponse is SendMessage's result: a task or a message.
type SendMessageResponse struct {
	Task    *Task    `json:"task,omitempty"`
	Message *Message `json:"message,omitempty"`
}

// StreamResponse is one event of a stream: exactly one of its fields.
type StreamResponse struct {
	Task           *Task                    `json:"task,omitempty"`
	Message        *Message                 `json:"message,omitempty"`
	StatusUpdate   *TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
}

// GetTaskRequest is GetTask's params.
type GetTaskRequest struct {
	Tenant        string `json:"tenant,omitempty"`
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// CancelTaskRequest is CancelTask's params.
type CancelTaskRequest struct {
	Tenant   string         `json:"tenant,omitempty"`
	ID       string         `json:"id"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// SubscribeToTaskRequest is SubscribeToTask's params.
type SubscribeToTaskRequest struct {
	Tenant string `json:"tenant,omitempty"`
	ID     string `json:"id"`
}
