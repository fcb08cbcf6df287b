package quiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quiverhq/quiver"
)

type transferArgs struct {
	To     string `json:"to" minLength:"1"`
	Amount int    `json:"amount" minimum:"1" maximum:"1000"`
}

// transferTool requires confirmation and records the arguments of every run.
func transferTool(ran *[]transferArgs) *quiver.Tool {
	return quiver.Func("transfer_money", "Transfers money to an account.", func(_ context.Context, a transferArgs) (string, error) {
		*ran = append(*ran, a)
		return "sent", nil
	}, quiver.WithConfirmation())
}

func TestHooks(t *testing.T) {
	type event struct{ hook, name, code string }
	tests := []struct {
		name        string
		tool        string
		args        string
		beforeCall  error
		wantRan     bool
		wantCode    quiver.Code
		wantEvents  []event
		wantErrText string
	}{
		{name: "success", tool: "greet", args: `{"name":"Ann"}`, wantRan: true,
			wantEvents: []event{{"before", "greet", ""}, {"success", "greet", ""}}},
		{name: "handler failure", tool: "fail", args: `{}`, wantRan: true, wantCode: quiver.CodeToolError,
			wantEvents: []event{{"before", "fail", ""}, {"failure", "fail", "tool_error"}}},
		{name: "rejected by BeforeCall", tool: "greet", args: `{"name":"Ann"}`, beforeCall: errors.New("quota exceeded"),
			wantCode: quiver.CodeRejected, wantErrText: "quota exceeded",
			wantEvents: []event{{"before", "greet", ""}, {"failure", "greet", "rejected"}}},
		{name: "invalid call skips BeforeCall", tool: "greet", args: `{"name":1}`, wantCode: quiver.CodeInvalidArguments,
			wantEvents: []event{{"failure", "greet", "invalid_arguments"}}},
		{name: "unknown tool", tool: "nope", args: `{}`, wantCode: quiver.CodeUnknownTool,
			wantEvents: []event{{"failure", "nope", "unknown_tool"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			greet := quiver.Func("greet", "Greets.", func(_ context.Context, a struct {
				Name string `json:"name"`
			}) (string, error) {
				ran = true
				return "hi " + a.Name, nil
			})
			fail := quiver.Func("fail", "Fails.", func(context.Context, struct{}) (string, error) {
				ran = true
				return "", errors.New("broken")
			})
			var events []event
			d := &quiver.Dispatcher{Registry: newRegistry(t, greet, fail), Hooks: quiver.Hooks{
				BeforeCall: func(_ context.Context, c *quiver.Call) error {
					events = append(events, event{"before", c.Name, ""})
					if c.Tool() == nil || c.Tool().Name() != c.Name {
						t.Errorf("BeforeCall sees tool %v", c.Tool())
					}
					return tt.beforeCall
				},
				AfterSuccess: func(_ context.Context, c *quiver.Call, r *quiver.Result) {
					events = append(events, event{"success", c.Name, string(r.Code)})
				},
				AfterFailure: func(_ context.Context, c *quiver.Call, r *quiver.Result) {
					events = append(events, event{"failure", c.Name, string(r.Code)})
				},
			}}
			r := dispatch(t, d, tt.tool, tt.args)
			if tt.wantCode == "" {
				wantSuccess(t, r)
			} else {
				wantError(t, r, tt.wantCode, tt.wantErrText)
			}
			if ran != tt.wantRan {
				t.Errorf("handler ran = %v, want %v", ran, tt.wantRan)
			}
			if !reflect.DeepEqual(events, tt.wantEvents) {
				t.Errorf("events %v, want %v", events, tt.wantEvents)
			}
		})
	}
}

func TestRecordingAndBeforeStore(t *testing.T) {
	tests := []struct {
		name        string
		noRecord    bool
		beforeStore func(context.Context, *quiver.Call, *quiver.Result) (*quiver.Result, bool)
		recErr      error
		wantStored  []string // texts recorded
		wantErr     bool
	}{
		{name: "recorded as is", wantStored: []string{"secret plans"}},
		{name: "rewritten", beforeStore: func(_ context.Context, _ *quiver.Call, r *quiver.Result) (*quiver.Result, bool) {
			c := *r
			c.Text = strings.ReplaceAll(r.Text, "secret", "public")
			return &c, true
		}, wantStored: []string{"public plans"}},
		// A dropped result still answers the call in history, without any of its content.
		{name: "dropped", beforeStore: func(context.Context, *quiver.Call, *quiver.Result) (*quiver.Result, bool) { return nil, false },
			wantStored: []string{"the result of plans was withheld from the conversation history"}},
		{name: "nil result drops", beforeStore: func(context.Context, *quiver.Call, *quiver.Result) (*quiver.Result, bool) { return nil, true },
			wantStored: []string{"the result of plans was withheld from the conversation history"}},
		{name: "NoRecord skips recording and BeforeStore", noRecord: true,
			beforeStore: func(context.Context, *quiver.Call, *quiver.Result) (*quiver.Result, bool) {
				panic("BeforeStore called for a NoRecord call")
			}},
		{name: "recorder error", recErr: errors.New("disk full"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &memRecorder{err: tt.recErr}
			d := &quiver.Dispatcher{Registry: newRegistry(t, textTool("plans", "secret plans")), Recorder: rec,
				Hooks: quiver.Hooks{BeforeStore: tt.beforeStore}}
			r, err := d.Dispatch(context.Background(), quiver.Call{Name: "plans", NoRecord: tt.noRecord})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && (!errors.Is(err, tt.recErr) || !strings.Contains(err.Error(), "plans")) {
				t.Errorf("err %q does not wrap the recorder's error and name the tool", err)
			}
			// The caller always receives the original result.
			if r == nil || r.Text != "secret plans" {
				t.Fatalf("caller got %+v", r)
			}
			var stored []string
			for _, rec := range rec.all() {
				stored = append(stored, rec.Result.Text)
			}
			if !reflect.DeepEqual(stored, tt.wantStored) {
				t.Errorf("stored %q, want %q", stored, tt.wantStored)
			}
		})
	}
}

// The recorder sees the arguments the handler received: defaults applied, meta-fields gone.
func TestRecorderSeesPreparedCall(t *testing.T) {
	tool := quiver.Func("hello", "Greets.", func(_ context.Context, a struct {
		Name string `json:"name,omitempty" default:"world"`
	}) (string, error) {
		return "hello " + a.Name, nil
	})
	rec := &memRecorder{}
	var seen *quiver.Call
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Recorder: rec, Hooks: quiver.Hooks{
		BeforeStore: func(_ context.Context, c *quiver.Call, r *quiver.Result) (*quiver.Result, bool) {
			seen = c
			return r, true
		}}}
	wantSuccess(t, dispatch(t, d, "hello", `{"_reasoningForCall":"be nice"}`))
	got := rec.all()
	if len(got) != 1 || got[0].Args != `{"name":"world"}` || got[0].Result.Text != "hello world" {
		t.Errorf("recorded %+v", got)
	}
	if seen == nil || seen.Reasoning != "be nice" || seen.Tool() == nil {
		t.Errorf("BeforeStore saw %+v", seen)
	}
}

func TestConfirmationGate(t *testing.T) {
	tests := []struct {
		name      string
		confirm   quiver.Confirmer // nil: no confirmer
		approved  bool
		args      string
		wantCode  quiver.Code // "" for success
		wantErr   []string
		wantRan   []transferArgs
		wantAsked int
	}{
		{name: "no confirmer pauses", args: `{"to":"bob","amount":10}`, wantCode: quiver.CodeConfirmationRequired,
			wantErr: []string{"requires a person's confirmation"}},
		{name: "approve", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Approve}, nil
			},
			wantRan: []transferArgs{{"bob", 10}}, wantAsked: 1},
		{name: "edit", args: `{"to":"bob","amount":900}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":"bob","amount":90,"_reasoningForCall":"lowered"}`)}, nil
			},
			wantRan: []transferArgs{{"bob", 90}}, wantAsked: 1},
		{name: "invalid edit", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":"bob","amount":5000}`)}, nil
			},
			wantCode: quiver.CodeInvalidArguments, wantErr: []string{"edited arguments are invalid", "/amount: maximum 1000, got 5000"}, wantAsked: 1},
		{name: "malformed edit", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":`)}, nil
			},
			wantCode: quiver.CodeInvalidJSON, wantErr: []string{"edited arguments are invalid"}, wantAsked: 1},
		{name: "deny with message", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Deny, Message: "not to Bob, ever"}, nil
			},
			wantCode: quiver.CodeDenied, wantErr: []string{"denied the call to transfer_money", "not to Bob, ever"}, wantAsked: 1},
		{name: "deny without message", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Deny}, nil
			},
			wantCode: quiver.CodeDenied, wantErr: []string{"denied"}, wantAsked: 1},
		{name: "pause", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Pause}, nil
			},
			wantCode: quiver.CodeConfirmationRequired, wantErr: []string{"waiting for a decision"}, wantAsked: 1},
		{name: "confirmer error", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{}, errors.New("approval service down")
			},
			wantCode: quiver.CodeConfirmationRequired, wantErr: []string{"approval service down"}, wantAsked: 1},
		{name: "unknown decision", args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: "maybe"}, nil
			},
			wantCode: quiver.CodeConfirmationRequired, wantErr: []string{`"maybe"`}, wantAsked: 1},
		{name: "already approved skips the gate", approved: true, args: `{"to":"bob","amount":10}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Deny}, nil
			},
			wantRan: []transferArgs{{"bob", 10}}},
		{name: "invalid call is refused before asking", args: `{"to":"bob","amount":0}`,
			confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
				return quiver.Decision{Action: quiver.Approve}, nil
			},
			wantCode: quiver.CodeInvalidArguments},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ran []transferArgs
			asked := 0
			var confirm quiver.Confirmer
			if tt.confirm != nil {
				confirm = func(ctx context.Context, c *quiver.Call) (quiver.Decision, error) {
					asked++
					if c.Name != "transfer_money" || len(c.Args) == 0 {
						t.Errorf("confirmer asked about %+v", c)
					}
					return tt.confirm(ctx, c)
				}
			}
			var approvedSeen bool
			d := &quiver.Dispatcher{Registry: newRegistry(t, transferTool(&ran)), Confirm: confirm,
				Middleware: []quiver.Middleware{func(next quiver.Handler) quiver.Handler {
					return func(ctx context.Context, c *quiver.Call) *quiver.Result {
						approvedSeen = c.Approved
						return next(ctx, c)
					}
				}}}
			r := dispatchCall(t, context.Background(), d, quiver.Call{Name: "transfer_money", Args: json.RawMessage(tt.args), Approved: tt.approved})
			if tt.wantCode == "" {
				wantSuccess(t, r)
				if !approvedSeen {
					t.Error("an executed call is not marked approved")
				}
			} else {
				wantError(t, r, tt.wantCode, tt.wantErr...)
			}
			if !reflect.DeepEqual(ran, tt.wantRan) {
				t.Errorf("handler ran with %+v, want %+v", ran, tt.wantRan)
			}
			if asked != tt.wantAsked {
				t.Errorf("confirmer asked %d times, want %d", asked, tt.wantAsked)
			}
		})
	}
}

// Tools without the confirmation flag never consult the confirmer.
func TestConfirmationOnlyForMarkedTools(t *testing.T) {
	asked := false
	d := &quiver.Dispatcher{Registry: newRegistry(t, textTool("free", "ok")),
		Confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
			asked = true
			return quiver.Decision{Action: quiver.Deny}, nil
		}}
	wantSuccess(t, dispatch(t, d, "free", "{}"))
	if asked {
		t.Error("confirmer asked about a tool that does not require confirmation")
	}
}

// BeforeCall runs after the confirmation gate, so a policy hook judges the arguments that will
// actually run, edited ones included.
func TestBeforeCallSeesEditedArguments(t *testing.T) {
	var ran []transferArgs
	var seen []string
	d := &quiver.Dispatcher{
		Registry: newRegistry(t, transferTool(&ran)),
		Confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
			return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":"bob","amount":5000}`)}, nil
		},
		Hooks: quiver.Hooks{BeforeCall: func(_ context.Context, c *quiver.Call) error {
			seen = append(seen, string(c.Args))
			if toMap(t, c.Args)["amount"] != nil {
				return nil
			}
			return errors.New("no amount")
		}},
	}
	// The edit is out of bounds: rejected before the hook or the tool.
	wantError(t, dispatch(t, d, "transfer_money", `{"to":"ann","amount":10}`), quiver.CodeInvalidArguments, "/amount: maximum 1000, got 5000")
	if len(seen) != 0 || len(ran) != 0 {
		t.Fatalf("hook saw %v, tool ran %v; want neither", seen, ran)
	}
	d2 := &quiver.Dispatcher{
		Registry: d.Registry,
		Confirm: func(context.Context, *quiver.Call) (quiver.Decision, error) {
			return quiver.Decision{Action: quiver.Edit, Args: json.RawMessage(`{"to":"bob","amount":7}`)}, nil
		},
		Hooks: d.Hooks,
	}
	wantSuccess(t, dispatch(t, d2, "transfer_money", `{"to":"ann","amount":10}`))
	if len(seen) != 1 || !jsonEqual(t, []byte(seen[0]), []byte(`{"to":"bob","amount":7}`)) {
		t.Fatalf("BeforeCall saw %v, want the edited arguments", seen)
	}
	if !reflect.DeepEqual(ran, []transferArgs{{To: "bob", Amount: 7}}) {
		t.Fatalf("tool ran with %v", ran)
	}
}

// A client cannot approve its own call by sending "approved": only the runtime sets it.
func TestApprovedIsNotReadFromJSON(t *testing.T) {
	var c quiver.Call
	if err := json.Unmarshal([]byte(`{"name":"transfer_money","args":{},"approved":true,"Approved":true}`), &c); err != nil {
		t.Fatal(err)
	}
	if c.Approved {
		t.Fatal("Call.Approved was set from JSON")
	}
}

// strictRecorder refuses a context that has ended, as the stores do.
type strictRecorder struct{ memRecorder }

func (s *strictRecorder) RecordResult(ctx context.Context, c *quiver.Call, r *quiver.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("recorded without a bound on the time it may take")
	}
	return s.memRecorder.RecordResult(ctx, c, r)
}

// X2, X3: a call cancelled while its tool runs is recorded (the record does not share the
// caller's cancellation, and is bounded by its own timeout); a call whose context ended before
// its tool started is not (nothing ran; its owner runs it later).
func TestRecordingOutlivesTheCallersCancellation(t *testing.T) {
	started := make(chan struct{})
	ran := 0
	tool := rawTool(t, "wait", "", func(ctx context.Context, _ json.RawMessage) (any, error) {
		ran++
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	rec := &strictRecorder{}
	d := &quiver.Dispatcher{Registry: newRegistry(t, tool), Recorder: rec, Grace: time.Second}
	cctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	r, err := d.Dispatch(cctx, quiver.Call{ID: "c1", Name: "wait"})
	if err != nil {
		t.Fatalf("recording the cancelled call failed: %v", err)
	}
	wantError(t, r, quiver.CodeCancelled, "was cancelled")
	if got := rec.all(); len(got) != 1 || got[0].Result.Code != quiver.CodeCancelled {
		t.Fatalf("recorded %+v, want the cancelled result", got)
	}

	// Already over before the tool starts: a cancelled result, nothing run, nothing recorded.
	r, err = d.Dispatch(cctx, quiver.Call{ID: "c2", Name: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, quiver.CodeCancelled, "was cancelled")
	if ran != 1 || len(rec.all()) != 1 {
		t.Fatalf("after a call under an ended context: ran %d, recorded %d; want 1 and 1", ran, len(rec.all()))
	}
}
