package messages_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
)

func choiceOf(multiple bool, ids ...string) messages.ChoiceQuestion {
	q := messages.ChoiceQuestion{Multiple: multiple}
	for _, id := range ids {
		q.Options = append(q.Options, messages.ChoiceOption{ID: id, Label: "Label " + id})
	}
	return q
}

func TestChoiceQuestion_Validate(t *testing.T) {
	t.Parallel()
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = string(rune('a' + i))
	}
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name string
		q    messages.ChoiceQuestion
		want string // "" for valid
	}{
		{"two", choiceOf(false, "a", "b"), ""},
		{"ten", choiceOf(true, eleven[:10]...), ""},
		{"one", choiceOf(false, "a"), "2 to 10 options"},
		{"eleven", choiceOf(false, eleven...), "2 to 10 options"},
		{"duplicate", choiceOf(false, "a", "a"), "not unique"},
		{"empty id", choiceOf(false, "a", ""), "id"},
		{"space in id", choiceOf(false, "a", "b c"), "id"},
		{"long id", choiceOf(false, "a", long(messages.MaxChoiceIDBytes+1)), "id"},
		{"empty label", messages.ChoiceQuestion{Options: []messages.ChoiceOption{{ID: "a", Label: "A"}, {ID: "b", Label: " "}}}, "label is empty"},
		{"long label", messages.ChoiceQuestion{Options: []messages.ChoiceOption{{ID: "a", Label: "A"}, {ID: "b", Label: long(messages.MaxChoiceLabelBytes + 1)}}}, "label"},
		{"long description", messages.ChoiceQuestion{Options: []messages.ChoiceOption{{ID: "a", Label: "A"},
			{ID: "b", Label: "B", Description: long(messages.MaxChoiceDescriptionBytes + 1)}}}, "description"},
	} {
		err := tc.q.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestChoiceQuestion_Check(t *testing.T) {
	t.Parallel()
	single, multi := choiceOf(false, "a", "b", "c"), choiceOf(true, "a", "b", "c")
	for _, tc := range []struct {
		q   messages.ChoiceQuestion
		ids []string
		ok  bool
	}{
		{single, []string{"b"}, true},
		{single, nil, false},
		{single, []string{"z"}, false},
		{single, []string{"a", "b"}, false},
		{multi, []string{"a", "c"}, true},
		{multi, []string{"a", "a"}, false},
		{multi, []string{"a", "z"}, false},
		{multi, []string{}, false},
	} {
		if err := tc.q.Check(tc.ids); (err == nil) != tc.ok {
			t.Errorf("multiple %v, %v: %v, want ok %v", tc.q.Multiple, tc.ids, err, tc.ok)
		}
	}
}

func TestChoiceQuestion_MatchAll(t *testing.T) {
	t.Parallel()
	single, multi := choiceOf(false, "a", "b", "c"), choiceOf(true, "a", "b", "c")
	for _, tc := range []struct {
		q    messages.ChoiceQuestion
		text string
		want []string // nil: no match
	}{
		{single, "b", []string{"b"}},
		{single, " label C ", []string{"c"}},
		{single, "2", []string{"b"}},
		{single, "4", nil},
		{single, "a, b", nil}, // a single choice reads the text as one option
		{single, "maybe", nil},
		{multi, "1, label c", []string{"a", "c"}},
		{multi, "a,z", nil},
	} {
		got, ok := tc.q.MatchAll(tc.text)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("multiple %v, %q: %v %v, want %v", tc.q.Multiple, tc.text, got, ok, tc.want)
		}
	}
	if got := multi.Labels([]string{"c", "zz"}); !slices.Equal(got, []string{"Label c", "zz"}) {
		t.Errorf("Labels: %v", got)
	}
}
