package actors

import (
	"github.com/conclave-ai/conclave/model/scripted"
	"github.com/conclave-ai/conclave/tool"
)

// defaultTools is Config.Tools' default: the scripted tools, search and
// (high-risk) publish.
var defaultTools = func() *tool.Set {
	s, err := tool.NewSet(scripted.SearchTool(), scripted.PublishTool())
	if err != nil {
		panic(err) // a programming error, caught by every test
	}
	return s
}()
