package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/conclave-ai/conclave/messages"
)

// The numbered prompt of a choice question, shared by `conclave run` (the
// interactive answer) and `conclave approve` (an interrupt by id).

// writeChoiceOptions lists p's options, numbered from 1.
func writeChoiceOptions(w io.Writer, p *messages.InterruptRaisedPayload) {
	for i, o := range p.Options {
		fmt.Fprintf(w, "  %d. %s [%s]", i+1, o.Label, o.ID)
		if o.Description != "" {
			fmt.Fprintf(w, ": %s", shorten(o.Description))
		}
		fmt.Fprintln(w)
	}
}

// choicePrompt is the question under the options.
func choicePrompt(p *messages.InterruptRaisedPayload) string {
	if p.MultipleChoice {
		return fmt.Sprintf("choose one or more of 1-%d (e.g. 1,3), or [r]eject? ", len(p.Options))
	}
	return fmt.Sprintf("choose 1-%d, or [r]eject? ", len(p.Options))
}

// choiceAnswer reads a typed answer to p: option numbers, ids or labels
// (comma-separated for a multiple choice), or r / reject / n / no to
// decline when no option has that name. ok is false when s names
// nothing; the engine still checks the answer.
func choiceAnswer(p *messages.InterruptRaisedPayload, s string) (res messages.Resume, ok bool) {
	if ids, ok := p.Choice().MatchAll(s); ok {
		return messages.Resume{Choices: ids}, true
	}
	if choice(strings.TrimSpace(s), "reject") == "reject" {
		return messages.Resume{Decision: messages.DecisionReject}, true
	}
	return messages.Resume{}, false
}

// chosenLabels is how an answer to p reads: its options' labels.
func chosenLabels(p *messages.InterruptRaisedPayload, ids []string) string {
	return strings.Join(p.Choice().Labels(ids), ", ")
}
