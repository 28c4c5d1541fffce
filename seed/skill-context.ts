// The skill-augmented context (docs/algorithm.md §5): the teacher prompt is the step's ordinary user message
// with one block inserted after the task line, else before "Now it's your turn", else at the end.
// Environments own their prompts; these are pure functions over the rendered text.

export const EPISODE_SKILL_TITLE = '**Episode-Level Skill**'
export const EPISODE_SKILL_INSTRUCTION =
  'Refer to this episode-level skill when deciding what action to take in the current episode'

/** Task-line patterns in priority order: the first pattern that matches anywhere wins. */
const TASK_LINE_PATTERNS = [
  { anchor: 'Your task is to:', pattern: /^.*\bYour task is to:\s*.*(?:\n|$)/m },
  { anchor: 'Your current task is:', pattern: /^.*\bYour current task is:\s*.*(?:\n|$)/m },
  { anchor: 'Your task is:', pattern: /^.*\bYour task is:\s*.*(?:\n|$)/m },
  { anchor: 'Your question:', pattern: /^.*\bYour question:\s*.*(?:\n|$)/m },
  { anchor: 'Your goal is', pattern: /^.*\bYour goal is\b.*(?:\n|$)/m },
] as const

/** Fallback anchors: the block goes right before the first one found. */
const TURN_ANCHORS = ["Now it's your turn to", "Now it's your turn"] as const

export type SkillAnchor = (typeof TASK_LINE_PATTERNS)[number]['anchor'] | (typeof TURN_ANCHORS)[number]

/** Where a block goes: after a task line, before a turn anchor, or appended at the end. */
export type Placement =
  | { kind: 'after-task-line'; anchor: SkillAnchor; index: number }
  | { kind: 'before-turn'; anchor: SkillAnchor; index: number }
  | { kind: 'end' }

/** The block for one episode skill: title, instruction, `[skill]`; '' for a blank skill. */
export function episodeSkillBlock(skill: string): string {
  const body = skill.trim()
  return body ? `${EPISODE_SKILL_TITLE}\n${EPISODE_SKILL_INSTRUCTION}:\n[${body}]` : ''
}

/**
 * The block for `grpo-opsd`'s raw hindsight: the text of a successful trajectory of the same group.
 * [INF] The paper does not give its wording; this mirrors the skill block.
 */
export function hindsightBlock(trajectoryText: string): string {
  const body = trajectoryText.trim()
  return body
    ? `**Successful Attempt**\nRefer to this successful attempt at the same task when deciding what action to take ` +
        `in the current episode:\n[${body}]`
    : ''
}

/** Where `insertBlock` would put a block in `prompt` (after trimming the prompt). */
export function findPlacement(prompt: string): Placement {
  const text = prompt.trim()
  for (const { anchor, pattern } of TASK_LINE_PATTERNS) {
    const match = pattern.exec(text)
    if (match) return { kind: 'after-task-line', anchor, index: match.index + match[0].length }
  }
  for (const anchor of TURN_ANCHORS) {
    const index = text.indexOf(anchor)
    if (index !== -1) return { kind: 'before-turn', anchor, index }
  }
  return { kind: 'end' }
}

/** Inserts `block` as its own paragraph (blank lines around it); a blank block leaves the prompt unchanged. */
export function insertBlock(prompt: string, block: string): string {
  const body = block.trim()
  if (!body) return prompt
  const text = prompt.trim()
  const placement = findPlacement(text)
  if (placement.kind === 'end') return text ? `${text}\n\n${body}` : body
  const prefix = text.slice(0, placement.index).trimEnd()
  const suffix = text.slice(placement.index).trimStart()
  return [prefix, body, suffix].filter((part) => part.length > 0).join('\n\n')
}

/** The teacher prompt: the ordinary step prompt with the episode skill inserted (docs/algorithm.md §5). */
export function insertSkill(prompt: string, skill: string): string {
  return insertBlock(prompt, episodeSkillBlock(skill))
}
