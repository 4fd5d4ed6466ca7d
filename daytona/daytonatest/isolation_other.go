//go:build !linux

package daytonatest

import (
	"errors"
	osexec "os/exec"
)

var errNoNamespaces = errors.New("mount namespaces need Linux")

func probeMethod(method) error { return errNoNamespaces }

func (sb *sandbox) stageCommand([]string, string, []string, bool) (*osexec.Cmd, error) {
	return nil, errNoNamespaces
}
