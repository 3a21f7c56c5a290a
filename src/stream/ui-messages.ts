/** Conversion between Vercel `UIMessage`s and native messages, in both directions. */
export { uiToNative } from './ui-to-native.ts';
export { nativeToUi } from './native-to-ui.ts';
