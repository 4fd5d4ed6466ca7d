package daytonatest

import (
	"maps"
	"time"
)

// Transition is one lifecycle state change of a sandbox as the emulator
// made it: tests that check a provider's answers against what Daytona did
// (a "stopped" receipt only after the stop) read them from Transitions.
type Transition struct {
	Time    time.Time
	Sandbox string // the sandbox id
	From    string // the state before ("" for a new sandbox)
	To      string
}

// Deletion is one deletion the emulator began (a DELETE, the stop of an
// ephemeral sandbox, auto-delete), with the sandbox's name and labels at
// that moment: tests prove from it that only owned sandboxes were deleted.
type Deletion struct {
	Time    time.Time
	Sandbox string
	Name    string // the name before the DESTROYED_ rename
	Labels  map[string]string
}

// history is the emulator's record of transitions and deletions.
type history struct {
	transitions []Transition
	deletions   []Deletion
}

// maxHistory bounds each log; the oldest half is dropped, as for requests.
const maxHistory = 200000

// Transitions returns every state change so far, in order.
func (s *Server) Transitions() []Transition {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Transition(nil), s.history.transitions...)
}

// Deletions returns every deletion begun so far, in order.
func (s *Server) Deletions() []Deletion {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]Deletion(nil), s.history.deletions...)
	for i := range out {
		out[i].Labels = maps.Clone(out[i].Labels)
	}
	return out
}

// recordStateLocked logs sb's change from state from to its current state.
func (s *Server) recordStateLocked(sb *sandbox, from string) {
	if from == sb.state {
		return
	}
	h := &s.history
	if len(h.transitions) >= maxHistory {
		h.transitions = append([]Transition(nil), h.transitions[maxHistory/2:]...)
	}
	h.transitions = append(h.transitions, Transition{Time: time.Now(), Sandbox: sb.id, From: from, To: sb.state})
}

// recordDeletionLocked logs the deletion of sb, before its rename.
func (s *Server) recordDeletionLocked(sb *sandbox) {
	h := &s.history
	if len(h.deletions) >= maxHistory {
		h.deletions = append([]Deletion(nil), h.deletions[maxHistory/2:]...)
	}
	h.deletions = append(h.deletions, Deletion{Time: time.Now(), Sandbox: sb.id, Name: sb.name, Labels: maps.Clone(sb.labels)})
}
