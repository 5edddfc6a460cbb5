package openai_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/conclave-ai/conclave/messages"
	"github.com/conclave-ai/conclave/model"
	"github.com/conclave-ai/conclave/model/openai"
	"github.com/conclave-ai/conclave/model/openai/openaitest"
)

var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	pdfBytes = []byte("%PDF-1.7\n")
	runFiles = []messages.RunFile{
		{Name: "notes.md", MediaType: "text/markdown", Size: 13, Data: []byte("# Notes\nhello")},
		{Name: "chart.png", MediaType: "image/png", Size: int64(len(pngBytes)), Data: pngBytes},
		{Name: "paper.pdf", MediaType: "application/pdf", Size: int64(len(pdfBytes)), Data: pdfBytes},
	}
)

func stopReply() openaitest.Reply {
	return openaitest.Reply{Chunks: []openaitest.Chunk{openaitest.TextChunk("ok"), openaitest.FinishChunk("stop"), openaitest.UsageChunk(10, 1, 0)}}
}

func filesReq() *model.Request {
	r := workerReq()
	r.Files = runFiles
	return &r
}

// TestModel_FilesAsText: by default (Inputs zero) a text file is in the
// task's text and an image or PDF is named there as left out; the task
// stays a string, which text-only servers take.
func TestModel_FilesAsText(t *testing.T) {
	t.Parallel()
	srv := openaitest.NewServer(t, openaitest.Config{TextOnly: true, Replies: []openaitest.Reply{stopReply()}})
	streamTurn(t, srv, openai.Config{}, filesReq())
	task := srv.Requests()[0].Messages[1]
	if task.Parts != nil {
		t.Fatalf("task sent as parts: %+v", task.Parts)
	}
	for _, want := range []string{
		"<file name=\"notes.md\" media_type=\"text/markdown\" size=\"13\">\n# Notes\nhello\n</file>",
		`<file name="chart.png" media_type="image/png" size="16" omitted="this model does not take image/png input"/>`,
		`<file name="paper.pdf" media_type="application/pdf" size="9" omitted="this model does not take application/pdf input"/>`,
	} {
		if !strings.Contains(string(task.Content), want) {
			t.Errorf("task lacks %q:\n%s", want, task.Content)
		}
	}
}

// TestModel_FilesAsParts: with Inputs images and PDF, the task is a text
// part then an image_url part (a PNG data URL) and a file part (a PDF data
// URL with its filename), which the fake's content part rules (the API's)
// take; a text-only model's server refuses the same request.
func TestModel_FilesAsParts(t *testing.T) {
	t.Parallel()
	in := openai.Inputs{Images: true, PDF: true}
	srv := openaitest.NewServer(t, openaitest.Config{Replies: []openaitest.Reply{stopReply()}})
	streamTurn(t, srv, openai.Config{Inputs: in}, filesReq())
	task := srv.Requests()[0].Messages[1]
	if len(task.Parts) != 3 || task.Parts[0].Type != "text" || task.Parts[1].Type != "image_url" || task.Parts[2].Type != "file" {
		t.Fatalf("task parts %+v", task.Parts)
	}
	if !strings.Contains(*task.Parts[0].Text, `<file name="chart.png" media_type="image/png" size="16" part="1"/>`) ||
		!strings.Contains(*task.Parts[0].Text, `<file name="paper.pdf" media_type="application/pdf" size="9" part="2"/>`) ||
		!strings.Contains(*task.Parts[0].Text, "# Notes\nhello") {
		t.Errorf("task text:\n%s", *task.Parts[0].Text)
	}
	if got, want := task.Parts[1].ImageURL.URL, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(pngBytes); got != want {
		t.Errorf("image url %q, want %q", got, want)
	}
	if f := task.Parts[2].File; f.FileData == nil || *f.FileData != "data:application/pdf;base64,"+base64.StdEncoding.EncodeToString(pdfBytes) || f.Filename == nil || *f.Filename != "paper.pdf" {
		t.Errorf("file part %+v", f)
	}

	textOnly := openaitest.NewServer(t, openaitest.Config{TextOnly: true, Replies: []openaitest.Reply{stopReply()}})
	if _, err := newModel(t, textOnly, openai.Config{Inputs: in, MaxAttempts: 1}).Stream(t.Context(), *filesReq()); err == nil ||
		!strings.Contains(err.Error(), "image_url is only supported by certain models") {
		t.Fatalf("text-only server: %v", err)
	}
}
