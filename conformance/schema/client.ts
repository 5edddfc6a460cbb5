// A client of the generated declarations: it must compile under --strict,
// and narrowing an event by its type must give that type's payload.
import type { ConclaveEvent, EventType } from "../../docs/schema/events";

export function describe(ev: ConclaveEvent): string {
  switch (ev.type) {
    case "text_delta":
      return `${ev.lane.stream_id}: ${ev.payload.delta}`;
    case "tool_call_finished":
      return `${ev.payload.display_name} took ${ev.payload.duration_display}`;
    case "run_finished":
      return `${ev.payload.answer} (${ev.payload.usage.input_tokens} in, request ${ev.payload.request_id ?? "-"})`;
    case "replan_attempt":
      return `re-planning ${ev.payload.attempt}/${ev.payload.max_attempts}`;
    default:
      return ev.type;
  }
}

export const every: EventType[] = ["run_started", "debate_round_restarted"];
