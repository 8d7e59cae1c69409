// Owns the character rule for short text that other people are shown as a name: a user's name (auth), a chat
// room's name, an API key's name. Such text is one line, and holds no character that is invisible or changes
// the direction of the text shown after it: "admin\u200b" looks like "admin", and "Ann\u202egnp.exe" shows as
// "Annexe.png" (issue 22 #8).

// Control characters (C0, DEL, C1) and the Unicode line/paragraph separators: a name is one line of text.
// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point
export const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
// Invisible and bidirectional formatting characters. Refused: soft hyphen U+00AD, Arabic letter mark U+061C,
// Mongolian vowel separator U+180E, zero-width space U+200B, LRM/RLM U+200E–U+200F, the embeddings and overrides
// U+202A–U+202E, word joiner and invisible operators U+2060–U+2064, the isolates U+2066–U+2069, the deprecated
// format characters U+206A–U+206F, the BOM / zero-width no-break space U+FEFF and the interlinear annotation
// characters U+FFF9–U+FFFB.
export const INVISIBLE =
  /[\u00ad\u061c\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]/;
// The zero-width (non-)joiners U+200C/U+200D are part of how Persian, Arabic and Indic names are written and of
// emoji sequences (👨‍👩‍👧), so they are allowed exactly there: between two letters/marks, or (ZWJ) between two
// emoji. Anywhere else (leading, trailing, next to a space or punctuation, doubled) they only hide text.
const JOINER_IN_WORD = /(?<=[\p{L}\p{M}])\u200c(?=[\p{L}\p{M}])|(?<=[\p{L}\p{M}])\u200d(?=[\p{L}\p{M}])/gu;
const JOINER_IN_EMOJI =
  /(?<=\p{Extended_Pictographic}|\p{Emoji_Modifier}|\ufe0f)\u200d(?=\p{Extended_Pictographic})/gu;

/** True when `text` holds a control character or a line/paragraph separator (see CONTROL). */
export function hasControl(text: string): boolean {
  return CONTROL.test(text);
}

/** True when `text` holds an invisible or bidirectional control character (see INVISIBLE above). */
export function hasInvisible(text: string): boolean {
  if (INVISIBLE.test(text)) return true;
  if (!text.includes('\u200c') && !text.includes('\u200d')) return false;
  return /[\u200c\u200d]/.test(text.replace(JOINER_IN_WORD, '').replace(JOINER_IN_EMOJI, ''));
}

export const CONTROL_MESSAGE = 'must be a single line without control characters';
export const INVISIBLE_MESSAGE = 'must not contain invisible or text-direction control characters';
