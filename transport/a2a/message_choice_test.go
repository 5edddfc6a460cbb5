package a2a

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

// TestResumesFrom_Choice: a choice is answered by a data part naming ids,
// or by text naming an option by number, id or label (a multiple choice
// several, separated by commas), or "reject" to decline; an unknown id,
// two ids for a single choice or text naming no option is refused.
func TestResumesFrom_Choice(t *testing.T) {
	t.Parallel()
	open := func(multiple bool) []OpenInterrupt {
		return []OpenInterrupt{{InterruptRaisedPayload: &messages.InterruptRaisedPayload{InterruptID: "c1", Kind: messages.InterruptChoice,
			Question: "Which?", MultipleChoice: multiple,
			Options: []messages.ChoiceOption{{ID: "red", Label: "Red"}, {ID: "blue", Label: "Deep Blue"}, {ID: "green", Label: "Green"}}}}}
	}
	text := func(s string) *Message { return &Message{Parts: []Part{TextPart(s)}} }
	data := func(s string) *Message { return &Message{Parts: []Part{{Data: json.RawMessage(s)}}} }
	for _, tc := range []struct {
		msg      *Message
		multiple bool
		want     []string // nil with decline false: refused
		decline  bool
	}{
		{text("2"), false, []string{"blue"}, false},
		{text("green"), false, []string{"green"}, false},
		{text(" deep blue "), false, []string{"blue"}, false},
		{text("1, green"), true, []string{"red", "green"}, false},
		{text("reject: none fits"), false, nil, true},
		{data(`{"interruptId":"c1","choices":["red"]}`), false, []string{"red"}, false},
		{data(`{"choices":["red","blue"]}`), true, []string{"red", "blue"}, false},
		{data(`{"decision":"reject"}`), false, nil, true},
		{text("purple"), false, nil, false},
		{text("1, 2"), false, nil, false},
		{text("4"), false, nil, false},
		{data(`{"choices":["red","blue"]}`), false, nil, false},
		{data(`{"choices":["purple"]}`), true, nil, false},
		{data(`{"choices":[]}`), true, nil, false},
	} {
		got, err := resumesFrom(tc.msg, "t1", open(tc.multiple))
		refused := tc.want == nil && !tc.decline
		if refused {
			if err == nil {
				t.Errorf("%+v (multiple %v): accepted %+v", tc.msg.Parts[0], tc.multiple, got)
			}
			continue
		}
		if err != nil || len(got) != 1 || got[0].InterruptID != "c1" || !slices.Equal(got[0].Choices, tc.want) ||
			(got[0].Decision == messages.DecisionReject) != tc.decline {
			t.Errorf("%+v (multiple %v): %+v %v, want %v", tc.msg.Parts[0], tc.multiple, got, err, tc.want)
		}
	}
	d := interruptData(open(false)[0])
	if len(d.Options) != 3 || !strings.Contains(string(d.ResponseSchema), `"enum":["red","blue","green"]`) ||
		!strings.Contains(string(d.ResponseSchema), `"maxItems":1`) {
		t.Errorf("interrupt data %+v, schema %s", d, d.ResponseSchema)
	}
	if p := prompt(open(true)[0]); !strings.Contains(p, "2. Deep Blue (blue)") || !strings.Contains(p, "one or more") {
		t.Errorf("prompt %q", p)
	}
}
