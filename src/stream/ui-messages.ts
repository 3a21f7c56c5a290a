/** Conversion between Vercel `UIMessage`s and native messages, in both directions. */
export { uiToNative, type UiToNativeOptions } from './ui-to-native.ts';
export { nativeToUi, type NativeToUiOptions } from './native-to-ui.ts';
