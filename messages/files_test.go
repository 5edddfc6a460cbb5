package messages

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// pngHeader is the start of every PNG: what a sniffer names image/png.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func TestStartRunOptions_Files(t *testing.T) {
	t.Parallel()
	d := RunDefaults{Concurrency: 8, ApprovalTimeout: time.Minute}
	req := StartRun{Question: "q", Files: []InputFile{
		{Name: "notes.md", Data: []byte("# Notes\nhello")},
		{Name: "chart", MediaType: "image/png", Data: pngHeader},
		{Name: "paper.pdf", Data: []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")},
		{Name: "fetched.txt", MediaType: "text/plain; charset=utf-8", Data: []byte("from a url"), URL: "https://files.example/fetched.txt"},
	}}
	o, err := req.Options(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Files) != 4 {
		t.Fatalf("files %+v", o.Files)
	}
	md, png, pdf, txt := o.Files[0], o.Files[1], o.Files[2], o.Files[3]
	sum := sha256.Sum256([]byte("# Notes\nhello"))
	if md.MediaType != "text/markdown" || md.Kind() != FileText || md.Size != 13 || md.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("markdown %+v", md)
	}
	if png.Kind() != FileImage || !strings.HasPrefix(png.DataURL(), "data:image/png;base64,iVBORw0KGgo") {
		t.Fatalf("png %+v %s", png, png.DataURL())
	}
	if pdf.MediaType != "application/pdf" || pdf.Kind() != FilePDF {
		t.Fatalf("pdf %+v", pdf)
	}
	if txt.MediaType != "text/plain" || txt.URL != "https://files.example/fetched.txt" {
		t.Fatalf("fetched %+v", txt)
	}
	// What run_started recorded comes back the same, bytes and all.
	b, err := json.Marshal(&RunStartedPayload{Question: "q", Files: o.Files})
	if err != nil {
		t.Fatal(err)
	}
	var st RunStartedPayload
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Options(d).Files; !reflect.DeepEqual(got, o.Files) {
		t.Fatalf("run_started files\n got %+v\nwant %+v", got, o.Files)
	}
	if !bytes.Contains(b, []byte(`"data":"iVBORw0KGgo`)) {
		t.Fatalf("data is not base64 in JSON: %s", b)
	}
}

func TestStartRunOptions_FilesRefused(t *testing.T) {
	t.Parallel()
	d := RunDefaults{Concurrency: 8, ApprovalTimeout: time.Minute}
	big := bytes.Repeat([]byte("a"), MaxFileBytes+1)
	third := bytes.Repeat([]byte("a"), MaxRunFilesBytes/3+1)
	many := make([]InputFile, MaxFiles+1)
	for i := range many {
		many[i] = InputFile{Name: "f.txt", Data: []byte("x")}
	}
	for _, tc := range []struct {
		name  string
		files []InputFile
		code  FileErrorCode
		index int
		says  string
	}{
		{"no name", []InputFile{{Data: []byte("x")}}, FileInvalid, 0, "name is required"},
		{"control in name", []InputFile{{Name: "a\nb.txt", Data: []byte("x")}}, FileInvalid, 0, "control characters"},
		{"neither", []InputFile{{Name: "a.txt"}}, FileInvalid, 0, "needs data or url"},
		{"url not fetched", []InputFile{{Name: "a.txt", URL: "https://x.example/a"}}, FileURLNotAllowed, 0, "--allow-file-url"},
		{"too large", []InputFile{{Name: "a.txt", Data: []byte("x")}, {Name: "b.txt", Data: big}}, FileTooLarge, 1, "over the 524288-byte limit"},
		{"run too large", []InputFile{{Name: "a.txt", Data: third}, {Name: "b.txt", Data: third}, {Name: "c.txt", Data: third}}, FilesTooLarge, 2, "over 655360 bytes"},
		{"too many", many, FilesTooLarge, -1, "at most 8 files"},
		{"unknown extension", []InputFile{{Name: "a.bin", Data: []byte("x")}}, FileUnsupportedType, 0, `extension ".bin"`},
		{"unsupported type", []InputFile{{Name: "a.zip", MediaType: "application/zip", Data: []byte("PK")}}, FileUnsupportedType, 0, "application/zip is not one"},
		{"not utf-8", []InputFile{{Name: "a.txt", Data: []byte{0xff, 0xfe}}}, FileInvalid, 0, "not UTF-8"},
		{"not a png", []InputFile{{Name: "a.png", Data: []byte("GIF89a......")}}, FileInvalid, 0, "bytes of image/gif, not of its media type image/png"},
	} {
		_, err := StartRun{Question: "q", Files: tc.files}.Options(d)
		var fe *FileError
		if !errors.As(err, &fe) || fe.Code != tc.code || fe.Index != tc.index || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: got %v (%+v), want %s at %d saying %q", tc.name, err, fe, tc.code, tc.index, tc.says)
		}
		if fe != nil && fe.TooLarge() != (tc.code == FileTooLarge || tc.code == FilesTooLarge) {
			t.Errorf("%s: TooLarge %v", tc.name, fe.TooLarge())
		}
	}
}

func TestCheckInputFiles(t *testing.T) {
	t.Parallel()
	ok := []InputFile{{Name: "a.txt", Data: []byte("x")}, {Name: "b.pdf", URL: "https://files.example/b.pdf"}}
	if err := CheckInputFiles(ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		f    InputFile
		code FileErrorCode
		says string
	}{
		{InputFile{Name: "a", Data: []byte("x"), URL: "https://x.example/a"}, FileInvalid, "both data and url"},
		{InputFile{Name: "a", URL: "ftp://x.example/a"}, FileInvalid, "not an absolute http or https URL"},
		{InputFile{Name: "a", URL: "/relative"}, FileInvalid, "not an absolute"},
		{InputFile{Name: "a", URL: "https://user:pw@x.example/a"}, FileInvalid, "credentials"},
		{InputFile{Name: "a", Data: bytes.Repeat([]byte("a"), MaxFileBytes+1)}, FileTooLarge, "limit of a file"},
	} {
		err := CheckInputFiles([]InputFile{tc.f})
		var fe *FileError
		if !errors.As(err, &fe) || fe.Code != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %s saying %q", tc.f.URL, err, tc.code, tc.says)
		}
	}
}
