// Vite builds the dashboard into DROVER_WEB_OUT (CMake sets it to a folder
// in the build directory), or dist/ beside this file when run by hand.
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/',
  build: {
    outDir: process.env.DROVER_WEB_OUT || 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    // One JS and one CSS file: fewer byte arrays in the binary.
    cssCodeSplit: false,
    chunkSizeWarningLimit: 1000,
  },
});
