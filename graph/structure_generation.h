// A process-wide number that moves whenever the structure of any object
// graph may have changed: a child tracked or replaced (Trackable::Track,
// TrackReference, TrackReplacing), a tracking error recorded, a slot created
// (SlotOwner::OnSlotCreated). Checkpoints keep what they derive from an
// object graph (its serialized form, the split of its values into files, the
// save ops) while it stays the same, so a save of an unchanged model does not
// walk the model again. Process-wide because objects know no parents: a
// change anywhere counts for every root.
//
// A reference (TrackReference) that expires changes what Children() lists
// without any of these; whoever caches checks its objects are still alive,
// but only after TrackablesDestroyed() has moved: checking thousands of
// weak pointers touches a cache line per object (8% of a save of 20,000
// small variables).
//
// Thread safety: every function may be called from any thread.

#ifndef CKFLOW_GRAPH_STRUCTURE_GENERATION_H_
#define CKFLOW_GRAPH_STRUCTURE_GENERATION_H_

#include <cstdint>

namespace ckflow {

uint64_t TrackableStructureGeneration();

// For Trackable subclasses whose Children(), Attributes() or slots change
// other than through Track, TrackReplacing or OnSlotCreated.
void NoteTrackableStructureChanged();

// A process-wide count of Trackables destroyed: unchanged, no object a cache
// holds by weak pointer can have expired.
uint64_t TrackablesDestroyed();

}  // namespace ckflow

#endif  // CKFLOW_GRAPH_STRUCTURE_GENERATION_H_
