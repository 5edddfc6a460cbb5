package messages

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A choice question (interrupt kind choice) offers a human MinChoiceOptions
// to MaxChoiceOptions options; the answer names the chosen option ids
// (Resume.Choices): exactly one for a single choice, at least one for a
// multiple choice. Nobody's silence picks an option: an unanswered choice
// question expires rejected, and its agent learns nobody chose.

// Bounds of a choice question, checked when the agent raises it
// (ChoiceQuestion.Validate).
const (
	MinChoiceOptions = 2
	MaxChoiceOptions = 10
	// MaxChoiceIDBytes bounds an option id: short, so that a human can
	// type it and a client can show it on a button.
	MaxChoiceIDBytes = 64
	// MaxChoiceLabelBytes bounds an option's label.
	MaxChoiceLabelBytes = 200
	// MaxChoiceDescriptionBytes bounds an option's description.
	MaxChoiceDescriptionBytes = 1000
)

// ChoiceOption is one option of a choice question.
type ChoiceOption struct {
	// ID is what an answer names: 1..64 bytes of letters, digits, '-',
	// '_' and '.', unique in its question.
	ID    string `json:"id"`
	Label string `json:"label"`
	// Description says more about the option (optional).
	Description string `json:"description,omitempty"`
}

// ChoiceQuestion is what a choice interrupt asks: its options, and whether
// more than one may be chosen.
type ChoiceQuestion struct {
	Options  []ChoiceOption
	Multiple bool
}

// Validate checks the question's options: 2..10 of them, unique valid
// ids, a non-empty label each, every text within its byte bound.
func (q ChoiceQuestion) Validate() error {
	if n := len(q.Options); n < MinChoiceOptions || n > MaxChoiceOptions {
		return fmt.Errorf("messages: a choice needs %d to %d options, got %d", MinChoiceOptions, MaxChoiceOptions, n)
	}
	seen := make(map[string]bool, len(q.Options))
	for i, o := range q.Options {
		switch {
		case !validChoiceID(o.ID):
			return fmt.Errorf("messages: option %d: id %q must be 1..%d bytes of letters, digits, '-', '_', '.'", i+1, truncate(o.ID, 32), MaxChoiceIDBytes)
		case seen[o.ID]:
			return fmt.Errorf("messages: option %d: id %q is not unique", i+1, o.ID)
		case strings.TrimSpace(o.Label) == "":
			return fmt.Errorf("messages: option %d (%s): label is empty", i+1, o.ID)
		case len(o.Label) > MaxChoiceLabelBytes || !utf8.ValidString(o.Label):
			return fmt.Errorf("messages: option %d (%s): label must be valid UTF-8 of at most %d bytes", i+1, o.ID, MaxChoiceLabelBytes)
		case len(o.Description) > MaxChoiceDescriptionBytes || !utf8.ValidString(o.Description):
			return fmt.Errorf("messages: option %d (%s): description must be valid UTF-8 of at most %d bytes", i+1, o.ID, MaxChoiceDescriptionBytes)
		}
		seen[o.ID] = true
	}
	return nil
}

// Check validates an answer naming ids: at least one, each an option's,
// none twice, and exactly one unless the question is a multiple choice.
func (q ChoiceQuestion) Check(ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("a choice needs choices: the chosen option ids (one of %s)", q.idList())
	}
	if len(ids) > 1 && !q.Multiple {
		return fmt.Errorf("this choice takes exactly one option id, got %d", len(ids))
	}
	for i, id := range ids {
		if q.Option(id) == nil {
			return fmt.Errorf("choice %q is not an option (one of %s)", truncate(id, 32), q.idList())
		}
		if slices.Contains(ids[:i], id) {
			return fmt.Errorf("choice %q is named twice", id)
		}
	}
	return nil
}

// Option is the option with id, nil if none.
func (q ChoiceQuestion) Option(id string) *ChoiceOption {
	for i := range q.Options {
		if q.Options[i].ID == id {
			return &q.Options[i]
		}
	}
	return nil
}

// Match finds the option a human's text names: its id, its label (case
// and surrounding space ignored) or its 1-based number in the list. ok is
// false when the text names none.
func (q ChoiceQuestion) Match(text string) (id string, ok bool) {
	t := strings.TrimSpace(text)
	if o := q.Option(t); o != nil {
		return o.ID, true
	}
	for _, o := range q.Options {
		if strings.EqualFold(strings.TrimSpace(o.Label), t) || strings.EqualFold(o.ID, t) {
			return o.ID, true
		}
	}
	if n, err := strconv.Atoi(t); err == nil && n >= 1 && n <= len(q.Options) {
		return q.Options[n-1].ID, true
	}
	return "", false
}

// MatchAll is Match for a list: a multiple choice's answer may name
// several options separated by commas ("1, 3" or "red, blue").
func (q ChoiceQuestion) MatchAll(text string) ([]string, bool) {
	parts := []string{text}
	if q.Multiple {
		parts = strings.Split(text, ",")
	}
	ids := make([]string, 0, len(parts))
	for _, p := range parts {
		id, ok := q.Match(p)
		if !ok {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// Labels are the labels of ids, in order (the id itself for an unknown one).
func (q ChoiceQuestion) Labels(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id
		if o := q.Option(id); o != nil {
			out[i] = o.Label
		}
	}
	return out
}

func (q ChoiceQuestion) idList() string {
	ids := make([]string, len(q.Options))
	for i, o := range q.Options {
		ids[i] = o.ID
	}
	return strings.Join(ids, ", ")
}

func validChoiceID(s string) bool {
	if s == "" || len(s) > MaxChoiceIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// Choice is the choice question of a raised choice interrupt.
func (p *InterruptRaisedPayload) Choice() ChoiceQuestion {
	return ChoiceQuestion{Options: p.Options, Multiple: p.MultipleChoice}
}
