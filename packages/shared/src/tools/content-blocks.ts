import { z } from 'zod';

/**
 * The content blocks of a tool result, as MCP defines them (`ContentBlock`,
 * protocol 2025-06-18 and later): text, image, audio, a link to a resource,
 * and an embedded resource. A result keeps them in order, beside its plain
 * `content` text, so clients that read only text see what they always saw.
 *
 * The objects are loose: `annotations`, `_meta`, `title`, `icons` and any
 * field a later protocol adds travel unchanged; only what a client needs to
 * render a block is checked.
 */
const Base64 = z.string().regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64');
const MimeType = z.string().min(1).max(255);
const Uri = z.string().min(1);

export const TextBlock = z.looseObject({ type: z.literal('text'), text: z.string() });
export type TextBlock = z.infer<typeof TextBlock>;

export const ImageBlock = z.looseObject({ type: z.literal('image'), data: Base64, mimeType: MimeType });
export type ImageBlock = z.infer<typeof ImageBlock>;

export const AudioBlock = z.looseObject({ type: z.literal('audio'), data: Base64, mimeType: MimeType });
export type AudioBlock = z.infer<typeof AudioBlock>;

export const ResourceLinkBlock = z.looseObject({ type: z.literal('resource_link'), uri: Uri, name: z.string() });
export type ResourceLinkBlock = z.infer<typeof ResourceLinkBlock>;

/** An embedded resource's contents: text, or binary as base64 `blob`. */
export const ResourceContents = z.union([z.looseObject({ uri: Uri, text: z.string() }), z.looseObject({ uri: Uri, blob: Base64 })]);
export type ResourceContents = z.infer<typeof ResourceContents>;

export const EmbeddedResourceBlock = z.looseObject({ type: z.literal('resource'), resource: ResourceContents });
export type EmbeddedResourceBlock = z.infer<typeof EmbeddedResourceBlock>;

export const ContentBlock = z.discriminatedUnion('type', [TextBlock, ImageBlock, AudioBlock, ResourceLinkBlock, EmbeddedResourceBlock]);
export type ContentBlock = z.infer<typeof ContentBlock>;

/** What a result's plain `content` says for its blocks: the text blocks' text, one per line. */
export function textOfBlocks(blocks: readonly ContentBlock[]): string {
  return blocks
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
}
